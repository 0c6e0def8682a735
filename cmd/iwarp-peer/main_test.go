package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Every test's connections and goroutines must be gone when it ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run(nil, &out, &errb))
	require.Contains(t, errb.String(), "usage: iwarp-peer")
	errb.Reset()
	require.Equal(t, 2, run([]string{"no-such-command"}, &out, &errb))
	require.Contains(t, errb.String(), `unknown command "no-such-command"`)

	called := false
	register("test-only", command{summary: "x", run: func(args []string, stdout, stderr io.Writer) error {
		called = true
		require.Equal(t, []string{"a"}, args)
		return nil
	}})
	defer delete(commands, "test-only")
	require.Equal(t, 0, run([]string{"test-only", "a"}, &out, &errb))
	require.True(t, called)
}
