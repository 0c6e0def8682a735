//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/stretchr/testify/require"
)

// served is a sink served on a loopback listener.
type served struct {
	t    testing.TB
	s    *Sink
	srv  *Server
	ln   *conn.Listener
	done chan error
}

// serve serves s on a loopback listener until the test ends.
func serve(t testing.TB, s *Sink, cfg ServerConfig, lopts ...conn.Option) *served {
	t.Helper()
	srv, err := NewServer(s, cfg)
	require.NoError(t, err)
	ln, err := conn.Listen(context.Background(), "tcp", "127.0.0.1:0", lopts...)
	require.NoError(t, err)
	x := &served{t: t, s: s, srv: srv, ln: ln, done: make(chan error, 1)}
	go func() { x.done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(x.stop)
	return x
}

func (x *served) addr() string { return x.ln.Addr().String() }

// stop shuts the server down; safe to call more than once.
func (x *served) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x.ln.Close()
	require.NoError(x.t, x.srv.Shutdown(ctx))
	select {
	case err := <-x.done:
		require.NoError(x.t, err)
		x.done <- nil
	case <-ctx.Done():
		x.t.Fatal("Serve did not return")
	}
}

func dialT(t testing.TB, addr string, opts ...InitiatorOption) *Initiator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := Dial(ctx, "tcp", addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { in.Close() })
	return in
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := l.Addr().String()
	l.Close()
	return a
}
