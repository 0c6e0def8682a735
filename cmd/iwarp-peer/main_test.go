package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Every test's connections and goroutines must be gone when it ends.
// Started by otherProcess, the test binary runs one command line instead.
func TestMain(m *testing.M) {
	if env, ok := os.LookupEnv(otherProcessEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(env), &args); err != nil {
			panic(err)
		}
		os.Exit(run(context.Background(), args, stdio{os.Stdout, os.Stderr}))
	}
	goleak.VerifyTestMain(cleanupM{m})
}

// cleanupM removes what the tests left for each other (the iwarp-peer
// binary some run) once all have run.
type cleanupM struct{ *testing.M }

func (c cleanupM) Run() int {
	code := c.M.Run()
	removeBinary()
	return code
}

// otherProcessEnv holds the command line otherProcess runs, in JSON.
const otherProcessEnv = "IWARP_PEER_TEST_COMMAND"

// otherProcess runs a command line in a process of its own (this test
// binary), so that its queue pairs are not counted in this process's
// device, and returns its exit status and output.
func otherProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	env, err := json.Marshal(args)
	require.NoError(t, err)
	cmd.Env = append(os.Environ(), otherProcessEnv+"="+string(env))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// runCmd runs a command line and returns its exit status and output.
func runCmd(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(ctx, args, stdio{&out, &errb})
	return code, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	ctx := context.Background()
	code, out, errb := runCmd(ctx)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "usage: iwarp-peer")
	require.Empty(t, out)
	code, _, errb = runCmd(ctx, "no-such-command")
	require.Equal(t, 2, code)
	require.Contains(t, errb, `unknown command "no-such-command"`)
	for _, h := range []string{"-h", "--help", "help"} {
		code, out, errb = runCmd(ctx, h)
		require.Equal(t, 0, code, h)
		require.Empty(t, errb)
		for _, c := range commands {
			require.Regexp(t, "(?m)^  "+regexp.QuoteMeta(c.name)+" +"+regexp.QuoteMeta(c.summary)+"$", out, "one indented line per command")
		}
	}
	code, out, _ = runCmd(ctx, "help", "rping")
	require.Equal(t, 0, code)
	require.Contains(t, out, "usage: iwarp-peer rping -s")
}

// The table is the one list of commands: unique names, in order, each
// described in the package documentation and in the README.
func TestCommandsTable(t *testing.T) {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	require.True(t, slices.IsSorted(names), "%v", names)
	require.Len(t, slices.Compact(slices.Clone(names)), len(names))

	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	doc := f.Doc.Text()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	for _, c := range commands {
		require.Regexp(t, "(?m)^\t"+regexp.QuoteMeta(c.name)+" +"+regexp.QuoteMeta(c.summary)+"$", doc, "package doc")
		require.Contains(t, string(readme), "iwarp-peer "+c.name, "README")
	}
}

// -h prints the command's usage on stdout and exits 0; a mistake exits 2
// and says why on stderr; every command.
func TestHelpAndMistakes(t *testing.T) {
	ctx := context.Background()
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			for _, h := range []string{"-h", "--help"} {
				code, out, errb := runCmd(ctx, c.name, h)
				require.Equal(t, 0, code, errb)
				require.True(t, strings.HasPrefix(out, "usage: iwarp-peer "+c.name), "%q", out)
				require.Empty(t, errb)
			}
			for _, args := range [][]string{{"--no-such-flag"}, {"extra", "words", "here"}} {
				code, out, errb := runCmd(ctx, append([]string{c.name}, args...)...)
				require.Equal(t, 2, code, "%v: %s", args, errb)
				require.NotEmpty(t, errb, "%v says why", args)
				require.Empty(t, out)
			}
		})
	}
	code, _, errb := runCmd(ctx, "mpa-demo", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errb, `iwarp-peer mpa-demo: unexpected argument "extra"`)
}
