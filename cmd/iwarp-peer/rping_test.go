package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/interrupt"
	"github.com/iwarp-go/iwarp-go/internal/rping"
)

func TestRping_Flags(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "iwarp-peer rping -s"},
		{[]string{"-s", "-c"}, "iwarp-peer rping -s"},
		// rdma-core's limit (RPING_BUFSIZE - 1), in words that do not call
		// the refused size valid.
		{[]string{"-s", "-S", "25"}, "Invalid size 25 (valid range is 26 to 65535)"},
		{[]string{"-s", "-S", "65536"}, "Invalid size 65536 (valid range is 26 to 65535)"},
		{[]string{"-s", "-C", "-1"}, "Invalid count -1"},
		{[]string{"-s", "-p", "70000"}, "Invalid port 70000"},
		{[]string{"-c"}, "the client needs -a addr"},
		{[]string{"-c", "-a", "x", "-P"}, "-P applies to the server only"},
		{[]string{"-s", "-I", "127.0.0.1"}, "-I applies to the client only"},
		{[]string{"-s", "--crc", "maybe"}, `--crc "maybe"`},
		{[]string{"-s", "--mpa-rev", "3"}, "--mpa-rev 3"},
		{[]string{"-s", "--p2p", "rdma"}, `--p2p "rdma"`},
		{[]string{"-c", "-a", "x", "--mpa-rev", "1", "--p2p", "write"}, "needs MPA revision 2"},
		{[]string{"-c", "-a", "x", "--mpa-rev", "1", "--no-enhanced"}, "--no-enhanced applies to MPA revision 2 only"},
		{[]string{"-s", "-x"}, "flag provided but not defined: -x"},
		{[]string{"-s", "extra"}, "iwarp-peer rping -s"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errb := runCmd(context.Background(), append([]string{"rping"}, c.args...)...)
			require.Equal(t, 2, code, errb)
			require.Contains(t, errb, c.msg)
			require.Empty(t, out)
		})
	}

	// rping's limits themselves are accepted, and getopt clusters work.
	std := stdio{&bytes.Buffer{}, &bytes.Buffer{}}
	a, err := parseRping([]string{"-cvVd", "-a", "10.0.0.1", "-S65535", "-C", "3", "-p7175"}, std)
	require.NoError(t, err)
	require.True(t, a.client && a.cfg.Verbose && a.cfg.Validate && a.cfg.Debug)
	require.Equal(t, 65535, a.cfg.Size)
	require.Equal(t, 3, a.cfg.Count)
	require.Equal(t, 7175, a.cfg.Port)
	a, err = parseRping([]string{"-s", "-S", "26", "-P", "--crc", "required", "-p2p=none"}, std)
	require.NoError(t, err)
	require.True(t, a.server && a.cfg.Persistent)
	require.Equal(t, 26, a.cfg.Size)
	require.Equal(t, rping.Port, 7174)
	require.Equal(t, "required", a.mpa.CRC)
	require.Equal(t, "none", a.mpa.P2P)
	require.Len(t, a.cfg.Options, 2+3, "the CRC, the RTR choice and the server limits")
}

// -h shows rping's flags with their defaults, on stdout.
func TestRping_HelpShowsDefaults(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "rping", "-h")
	require.Equal(t, 0, code)
	require.Empty(t, errb)
	for _, want := range []string{"ping data size (default 64; 26 to 65535)", "port (default 7174;", "ping count times (default 0:"} {
		require.Contains(t, out, want)
	}
}

// background runs a command line until it ends; the test ends it with
// stop and waits for its exit status.
type background struct {
	stdout, stderr conntest.LockedBuffer
	stop           context.CancelCauseFunc
	code           chan int
}

func start(args ...string) *background {
	ctx, cancel := context.WithCancelCause(context.Background())
	b := &background{stop: cancel, code: make(chan int, 1)}
	go func() { b.code <- run(ctx, args, stdio{&b.stdout, &b.stderr}) }()
	return b
}

// waitFor waits until stdout matches re and returns the first submatch.
func (b *background) waitFor(t *testing.T, re string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := r.FindStringSubmatch(b.stdout.String()); m != nil {
			return m[len(m)-1]
		}
	}
	t.Fatalf("no %q in the output:\n%s\n%s", re, b.stdout.String(), b.stderr.String())
	return ""
}

func (b *background) exit(t *testing.T) int {
	t.Helper()
	select {
	case c := <-b.code:
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not end:\n%s\n%s", b.stdout.String(), b.stderr.String())
	}
	return 0
}

// -p 0 prints the port the server got. A server stopped by SIGTERM or
// SIGINT after a clean shutdown prints one line and exits 0; a client
// interrupted mid-run exits 1 and says so.
func TestRping_PortZeroAndSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		srv := start("rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0")
		port := srv.waitFor(t, `^listening on port (\d+)\n`)
		_, err := strconv.Atoi(port)
		require.NoError(t, err)

		code, out, errb := runCmd(context.Background(), "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "2", "-v")
		require.Equal(t, 0, code, errb)
		require.Equal(t, 2, strings.Count(out, "ping data: rdma-ping-"))

		cli := start("rping", "-c", "-a", "127.0.0.1", "-p", port, "-v")
		cli.waitFor(t, `(rdma-ping-3)`)
		cli.stop(interrupt.Signal{Signal: sig})
		require.Equal(t, 1, cli.exit(t))
		require.Regexp(t, `rping client failed: interrupted after \d+ pings`, cli.stderr.String())

		srv.stop(interrupt.Signal{Signal: sig})
		require.Equal(t, 0, srv.exit(t), srv.stderr.String())
		line := fmt.Sprintf("iwarp-peer rping: server stopped (%v)\n", sig)
		require.True(t, strings.HasSuffix(srv.stderr.String(), line), "%q", srv.stderr.String())
		require.Equal(t, 1, strings.Count(srv.stderr.String(), "stopped"), "one line")
	}
}
