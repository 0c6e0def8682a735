package conn

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingTap counts the bytes a tapped connection moves.
type countingTap struct{ in, out atomic.Int64 }

type countingConn struct {
	net.Conn
	t *countingTap
}

func (t *countingTap) Wrap(c net.Conn) net.Conn { return &countingConn{Conn: c, t: t} }

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.t.out.Add(int64(n))
	return n, err
}

// TestTap_SeesEveryByte: a tap sees the MPA frames and every FPDU, in both
// directions, and the connection works through it.
func TestTap_SeesEveryByte(t *testing.T) {
	checkLeaks(t)
	var ct, st countingTap
	var rbuf *MR
	client, server := connectPair(t, pairConfig{
		clientOpts:   []Option{WithTap(&ct), WithCRC(CRCOff)},
		serverOpts:   []Option{WithTap(&st)},
		beforeAccept: postOneRecv(t, &rbuf),
	})
	src := client.register(t, 60, 0)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{src.SGE(0, 60)}}))
	client.waitOK(t, WCSend)
	server.waitOK(t, WCRecv)
	// Request: 20 + 4 (IRD/ORD) + 8 (iwarp-go trailer) = 32; the Reply the
	// same; the Write RTR FPDU 20; the Send FPDU 2+18+1000+pad 0+4 = 1024.
	require.Equal(t, int64(32+20+84), ct.out.Load())
	require.Equal(t, int64(32), ct.in.Load())
	require.Equal(t, ct.out.Load(), st.in.Load())
	require.Equal(t, ct.in.Load(), st.out.Load())
	require.Error(t, WithTap(nil).apply(&config{}))
}

// TestTap_WithoutPeerTrailer: without the trailer the Request carries only
// the IRD/ORD block, and the responder treats the initiator as a foreign
// peer.
func TestTap_WithoutPeerTrailer(t *testing.T) {
	checkLeaks(t)
	var ct countingTap
	client, server := connectPair(t, pairConfig{clientOpts: []Option{WithTap(&ct), WithoutPeerTrailer(), WithoutP2P()}})
	require.False(t, server.qp.PeerIsIwarpGo())
	require.False(t, client.qp.PeerIsIwarpGo())
	require.Equal(t, int64(20+4), ct.out.Load(), "Request: header and IRD/ORD block only")
}
