package connflags

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

func parseLimits(t *testing.T, args string) *Limits {
	var l Limits
	testutil.ParseFlags(t, l.Register, args)
	return &l
}

func TestLimits_Defaults(t *testing.T) {
	l := parseLimits(t, "")
	require.Equal(t, Limits{MaxConns: DefaultMaxConns, Handshakes: DefaultHandshakes, Idle: DefaultIdle}, *l)
	require.NoError(t, l.Check())
	require.Len(t, l.Options(), 3, "the defaults are on")
	l = parseLimits(t, "--max-conns 0 --max-handshakes 0 --idle-timeout 0")
	require.NoError(t, l.Check())
	require.Empty(t, l.Options(), "0 lifts every limit")
	require.Len(t, parseLimits(t, "--max-conns 0 --idle-timeout 0").Options(), 1)
}

func TestLimits_Check(t *testing.T) {
	for args, msg := range map[string]string{
		"--max-conns -1":      "--max-conns -1: must not be negative",
		"--max-handshakes -2": "--max-handshakes -2: must not be negative",
		"--idle-timeout -1s":  "--idle-timeout -1s: must not be negative",
	} {
		require.EqualError(t, parseLimits(t, args).Check(), msg)
	}
}

// The options bound a real listener: with --max-conns 1 and one
// connection held, the next is closed before any MPA exchange; with
// --idle-timeout the held one is closed once it has been idle that long.
func TestLimits_Options(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := parseLimits(t, "--max-conns 1 --idle-timeout 200ms")
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", l.Options()...)
	require.NoError(t, err)
	defer ln.Close()
	pd := conn.NewPD()
	srv, err := pd.NewQP(conn.NewCQ(8), conn.QPCaps{})
	require.NoError(t, err)
	defer srv.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, srv) }()
	cli, err := pd.NewQP(conn.NewCQ(8), conn.QPCaps{})
	require.NoError(t, err)
	defer cli.Close()
	require.NoError(t, cli.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-accepted)

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.Error(t, err, "a connection over --max-conns is closed")
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection over --max-conns stayed open")

	select {
	case <-cli.Done():
	case <-ctx.Done():
		t.Fatal("the idle connection was not closed")
	}
}
