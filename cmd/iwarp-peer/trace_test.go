package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/syncwriter"
)

// iwarp-peer -d traces every connection of the command on stderr (conn's
// slog records: setup, teardown); without it nothing of that is printed,
// but a server still says, in one line, which connection its listener
// refused and why.
func TestTrace(t *testing.T) {
	srv := start("-d", "rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0")
	port := srv.waitFor(t, `^listening on port (\d+)\n`)
	cli := start("-d", "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "2")
	require.Equal(t, 0, cli.exit(t), cli.stderr.String())
	waitIn(t, &cli.stderr, `level=INFO msg="iwarp: connected"`)
	// conn logs the close from the goroutine that ended the connection,
	// which may be a moment after Close returned.
	waitIn(t, &cli.stderr, `msg="iwarp: closed"`)
	waitIn(t, &srv.stderr, `msg="iwarp: connected"`)
	srv.stopped(t)

	srv = start("rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0")
	port = srv.waitFor(t, `^listening on port (\d+)\n`)
	code, _, errb := runCmd(t.Context(), "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "2")
	require.Equal(t, 0, code, errb)
	require.NotContains(t, errb, `msg="iwarp: `)
	conntest.Garbage(t, "127.0.0.1:"+port)
	line := waitIn(t, &srv.stderr, `(?m)^(.*msg="iwarp: connection refused".*)$`)
	require.Regexp(t, `remote=127\.0\.0\.1:\d+ reason="iwarp: reading the MPA request: .+" suppressed=0$`, line)
	srv.stopped(t)
	require.Equal(t, 1, strings.Count(srv.stderr.String(), `msg="iwarp: `), "only the refusal: %s", srv.stderr.String())

	code, _, errb = runCmd(t.Context(), "-d")
	require.Equal(t, 2, code)
	require.Contains(t, errb, "usage: iwarp-peer [-d] <command>")
	code, out, _ := runCmd(t.Context(), "-d", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "  -d ")
}

// A file is used as it is; any other writer is locked, so that lines
// written at once from several goroutines arrive whole.
func TestShared(t *testing.T) {
	require.Equal(t, os.Stderr, shared(os.Stderr))
	var b bytes.Buffer
	w := shared(&b)
	require.IsType(t, &syncwriter.Writer{}, w)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				w.Write([]byte(strings.Repeat(string(rune('a'+i)), 32) + "\n"))
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 800)
	for _, l := range lines {
		require.Equal(t, strings.Repeat(l[:1], 32), l)
	}
}
