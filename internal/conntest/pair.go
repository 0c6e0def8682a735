package conntest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Pair is a client and a server queue pair of one device, connected over
// loopback through the server's listener. Each side has a region of
// PairRegion bytes that the other may write and read. Everything is
// closed when the test ends.
type Pair struct {
	Client, Server     *conn.QP
	ClientCQ, ServerCQ *conn.CQ
	ClientMR, ServerMR *conn.MR
	Listener           *conn.Listener
}

// PairRegion is the size of a Pair's regions.
const PairRegion = 4096

// NewPair connects a pair on dev; lnOpts are the listener's options.
// recvs receives of 256 bytes (at the server's region's start) are posted
// on the server before it accepts.
func NewPair(t testing.TB, dev *conn.Device, recvs int, lnOpts ...conn.Option) *Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &Pair{ClientCQ: conn.NewCQ(64), ServerCQ: conn.NewCQ(64)}
	pd := dev.NewPD()
	all := conn.LocalWrite | conn.RemoteWrite | conn.RemoteRead
	var err error
	p.Client, err = pd.NewQP(p.ClientCQ, conn.QPCaps{})
	require.NoError(t, err)
	t.Cleanup(func() { p.Client.Close() })
	p.Server, err = pd.NewQP(p.ServerCQ, conn.QPCaps{})
	require.NoError(t, err)
	t.Cleanup(func() { p.Server.Close() })
	p.ClientMR, err = pd.Register(make([]byte, PairRegion), all)
	require.NoError(t, err)
	p.ServerMR, err = pd.Register(make([]byte, PairRegion), all)
	require.NoError(t, err)
	for i := range recvs {
		require.NoError(t, p.Server.PostRecv(conn.RecvWR{ID: uint64(i), SGL: []conn.SGE{p.ServerMR.SGE(0, 256)}}))
	}
	p.Listener, err = conn.Listen(ctx, "tcp", "127.0.0.1:0", lnOpts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.Listener.Close() })
	accepted := make(chan error, 1)
	go func() { accepted <- p.Listener.Accept(ctx, p.Server) }()
	require.NoError(t, p.Client.Connect(ctx, "tcp", p.Listener.Addr().String()))
	require.NoError(t, <-accepted)
	return p
}

// Do posts wr on the client, signaled, and waits for its completion; it
// returns the completion's error.
func (p *Pair) Do(t testing.TB, wr conn.SendWR) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wr.Flags |= conn.Signaled
	require.NoError(t, p.Client.PostSend(wr))
	var wc [1]conn.WorkCompletion
	_, err := p.ClientCQ.Wait(ctx, wc[:])
	require.NoError(t, err)
	return wc[0].Err()
}

// Closed closes both queue pairs (Close waits until each has ended).
func (p *Pair) Closed(t testing.TB) {
	t.Helper()
	require.NoError(t, p.Client.Close())
	require.NoError(t, p.Server.Close())
}

// Ended waits until both queue pairs have left the connected state,
// whatever ended them, then closes them: what the connection sent and
// received is counted then.
func (p *Pair) Ended(t testing.TB) {
	t.Helper()
	for _, qp := range []*conn.QP{p.Client, p.Server} {
		select {
		case <-qp.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("a queue pair did not end")
		}
	}
	p.Closed(t)
}

// WriteSendRead runs an RDMA Write of 100 bytes, a Send of 10 and an RDMA
// Read of 64 from the client, one after the other (the pair needs a
// receive posted). With the client's Write RTR (the library's default
// peer-to-peer mode), the wire carries Writes of 0 and 100 bytes, one
// Send, one Read Request and one Read Response of 64 bytes.
func (p *Pair) WriteSendRead(t testing.TB) {
	t.Helper()
	require.NoError(t, p.Do(t, conn.SendWR{Op: conn.OpWrite, SGL: []conn.SGE{p.ClientMR.SGE(0, 100)}, Remote: p.ServerMR.Remote(0)}))
	require.NoError(t, p.Do(t, conn.SendWR{Op: conn.OpSend, SGL: []conn.SGE{p.ClientMR.SGE(0, 10)}}))
	require.NoError(t, p.Do(t, conn.SendWR{Op: conn.OpRead, SGL: []conn.SGE{p.ClientMR.SGE(0, 64)}, Remote: p.ServerMR.Remote(512)}))
}
