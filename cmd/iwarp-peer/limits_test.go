package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/connflags"
)

// A server's limits: a connection beyond --max-conns is closed at once
// (and said so on stderr without -d), and one that sends nothing is closed
// after --idle-timeout, freeing its place for a real client. The timeout
// is well above the 300 ms an rping client holds back its first FPDU
// toward a server it cannot tell is iwarp-go (conn.DefaultFirstFPDUDelay):
// at 300 ms the real client's connection was closed as idle as often as
// not.
func TestRping_ServerLimits(t *testing.T) {
	srv := start("rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0", "--max-conns", "1", "--idle-timeout", "1s")
	port := srv.waitFor(t, `^listening on port (\d+)\n`)
	addr := net.JoinHostPort("127.0.0.1", port)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	idle := holdAndRefuse(ctx, t, addr)
	require.Eventually(t, func() bool { return strings.Contains(srv.stderr.String(), "connection refused") },
		10*time.Second, 10*time.Millisecond, "the refusal is logged without -d: %s", srv.stderr.String())

	// The idle connection is closed by the server; then a client is served.
	select {
	case <-idle.Done():
	case <-ctx.Done():
		t.Fatal("the idle connection was not closed")
	}
	// Its place is free once the server has ended it too, just after.
	var out, errb string
	require.Eventually(t, func() bool {
		var code int
		code, out, errb = runCmd(ctx, "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "2", "-v")
		return code == 0
	}, 10*time.Second, 20*time.Millisecond, "no client served after the idle one: %s", errb)
	require.Equal(t, 2, strings.Count(out, "ping data: rdma-ping-"))

	srv.stop(context.Canceled)
	require.Equal(t, 0, srv.exit(t), srv.stderr.String())
}

// holdAndRefuse connects a queue pair to a server run with --max-conns 1
// and checks that a second connection is then closed before any MPA
// exchange. It returns the queue pair holding the one place.
func holdAndRefuse(ctx context.Context, t *testing.T, addr string) *conn.QP {
	t.Helper()
	held, err := conn.NewPD().NewQP(conn.NewCQ(8), conn.QPCaps{})
	require.NoError(t, err)
	t.Cleanup(func() { held.Close() })
	require.NoError(t, held.Connect(ctx, "tcp", addr))
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "a connection over --max-conns is closed")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection over --max-conns stayed open")
	return held
}

func TestLimits_Flags(t *testing.T) {
	for _, c := range []struct{ args, msg string }{
		{"--max-conns -1", "--max-conns -1: must not be negative"},
		{"--idle-timeout -1s", "--idle-timeout -1s: must not be negative"},
		{"--max-handshakes x", "invalid value"},
	} {
		code, _, errb := runCmd(context.Background(), append([]string{"rping", "-s"}, strings.Fields(c.args)...)...)
		require.Equal(t, 2, code, errb)
		require.Contains(t, errb, c.msg)
	}
	std := stdio{&strings.Builder{}, &strings.Builder{}}
	a, err := parseRping([]string{"-s", "--max-conns", "0", "--idle-timeout", "0", "--max-handshakes", "0"}, std)
	require.NoError(t, err)
	require.Empty(t, a.limits.Options(), "0 lifts every limit")
	a, err = parseRping([]string{"-s"}, std)
	require.NoError(t, err)
	require.Len(t, a.limits.Options(), 3, "the defaults are on")
	require.Equal(t, connflags.DefaultMaxConns, a.limits.MaxConns)
}
