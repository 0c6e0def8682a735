package conn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// endpoint is one side of a test connection.
type endpoint struct {
	pd *PD
	cq *CQ
	qp *QP
}

func newEndpoint(t testing.TB, caps QPCaps) *endpoint {
	t.Helper()
	pd := NewPD()
	cq := NewCQ(1024)
	qp, err := pd.NewQP(cq, caps)
	require.NoError(t, err)
	return &endpoint{pd: pd, cq: cq, qp: qp}
}

func (ep *endpoint) register(t testing.TB, n int, access Access) *MR {
	t.Helper()
	mr, err := ep.pd.Register(make([]byte, n), access)
	require.NoError(t, err)
	return mr
}

// wait returns the next completion of ep, failing the test after 10 s.
func (ep *endpoint) wait(t testing.TB) WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]WorkCompletion
	_, err := ep.cq.Wait(ctx, wc[:])
	require.NoError(t, err, "waiting for a completion")
	return wc[0]
}

func (ep *endpoint) waitOK(t testing.TB, op WCOpcode) WorkCompletion {
	t.Helper()
	wc := ep.wait(t)
	require.NoError(t, wc.Err())
	require.Equal(t, op, wc.Op)
	return wc
}

type pairConfig struct {
	network      string // "tcp" (default) or "pipe"
	caps         QPCaps
	clientOpts   []Option
	serverOpts   []Option
	beforeAccept func(server *endpoint) // e.g. post receives
	beforeDial   func(client *endpoint)
}

// connectPair connects two endpoints over loopback TCP or net.Pipe and
// closes both at the end of the test.
func connectPair(t testing.TB, pc pairConfig) (client, server *endpoint) {
	t.Helper()
	client = newEndpoint(t, pc.caps)
	server = newEndpoint(t, pc.caps)
	if pc.beforeAccept != nil {
		pc.beforeAccept(server)
	}
	if pc.beforeDial != nil {
		pc.beforeDial(client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	if pc.network == "pipe" {
		a, b := net.Pipe()
		go func() {
			cr, err := Server(ctx, b, pc.serverOpts...)
			if err != nil {
				errc <- err
				return
			}
			errc <- cr.Accept(ctx, server.qp)
		}()
		require.NoError(t, client.qp.Client(ctx, a, pc.clientOpts...))
	} else {
		ln, err := Listen(ctx, "tcp", "127.0.0.1:0", pc.serverOpts...)
		require.NoError(t, err)
		defer ln.Close()
		go func() { errc <- ln.Accept(ctx, server.qp) }()
		require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String(), pc.clientOpts...))
	}
	require.NoError(t, <-errc)
	t.Cleanup(func() {
		client.qp.Close()
		server.qp.Close()
	})
	return client, server
}

// connectOnPD connects a new client endpoint to ln and accepts it into a
// new queue pair of pd completing on cq (several queue pairs sharing a
// PD), closing both at the end of the test.
func connectOnPD(t testing.TB, ctx context.Context, ln *Listener, pd *PD, cq *CQ, setup func(*QP)) (server *QP, client *endpoint) {
	t.Helper()
	server, err := pd.NewQP(cq, QPCaps{})
	require.NoError(t, err)
	if setup != nil {
		setup(server)
	}
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server) }()
	client = newEndpoint(t, QPCaps{})
	require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)
	t.Cleanup(func() { client.qp.Close(); server.Close() })
	return server, client
}

// checkLeaks fails the test if goroutines started by it are still running.
func checkLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}
