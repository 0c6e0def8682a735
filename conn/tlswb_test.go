package conn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// stalledTCP is a loopback TCP connection whose peer reads nothing until
// told to; the peer's end is returned for reading.
func stalledTCP(t *testing.T) (c, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		p, _ := ln.Accept()
		acc <- p
	}()
	c, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	peer = <-acc
	require.NotNil(t, peer)
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// The write-behind layer never waits for a peer that stops reading: what
// the socket refuses goes to the backlog up to wbMax, and a write past
// that fails rather than waits.
func TestWriteBehind_NeverBlocks(t *testing.T) {
	checkLeaks(t)
	c, _ := stalledTCP(t)
	wb := newWriteBehind(c, c)
	wb.enable()
	kicks := 0
	wb.notify(func() { kicks++ }) // one Write at a time, each waited for
	chunk := make([]byte, 16<<10)
	var err error
	for i := 0; err == nil; i++ {
		var n int
		returnsWithin(t, hangLimit, "writeBehind.Write", func() { n, err = wb.Write(chunk) })
		if err == nil {
			require.Equal(t, len(chunk), n, "a Write that succeeds takes everything")
		}
		require.Less(t, i, 100000, "the backlog never filled")
	}
	require.ErrorIs(t, err, errWBFull)
	require.Positive(t, kicks, "a Write that left bytes behind did not tell the transmitter")
	require.Positive(t, wb.pending())
	require.LessOrEqual(t, wb.pending(), wbMax)
	_, err = wb.Write(chunk)
	require.ErrorIs(t, err, errWBFull, "the failure is not sticky")
}

// drainTo, which may block, obeys the socket's write deadline.
func TestWriteBehind_DrainObeysDeadline(t *testing.T) {
	checkLeaks(t)
	c, _ := stalledTCP(t)
	wb := newWriteBehind(c, c)
	wb.enable()
	chunk := make([]byte, 16<<10)
	for i := 0; wb.pending() < 4*len(chunk); i++ {
		_, err := wb.Write(chunk)
		require.NoError(t, err)
		require.Less(t, i, 100000)
	}
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	require.ErrorIs(t, wb.drainTo(0), os.ErrDeadlineExceeded)
	_, err := wb.Write(chunk)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a Write after the socket failed was taken")
}

// Once the peer reads again, drainTo(0) empties the backlog and the peer
// has every byte in order.
func TestWriteBehind_DrainsInOrder(t *testing.T) {
	checkLeaks(t)
	c, peer := stalledTCP(t)
	wb := newWriteBehind(c, c)
	wb.enable()
	var sent bytes.Buffer
	chunk := make([]byte, 16<<10)
	for i := 0; wb.pending() < 4*len(chunk); i++ {
		for j := range chunk {
			chunk[j] = byte(i*7 + j)
		}
		_, err := wb.Write(chunk)
		require.NoError(t, err)
		sent.Write(chunk)
		require.Less(t, i, 100000)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, sent.Len())
		_, err := io.ReadFull(peer, b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	require.NoError(t, wb.drainTo(0))
	require.Zero(t, wb.pending())
	require.Equal(t, sent.Bytes(), <-got)
}

// Inside TLS a posting goroutine writes its message itself (one sealed
// record, no hand-off to the transmitter), so a peer that stops reading
// must not make PostSend wait: posts return while the transmitter is stuck
// behind the full socket, and a Close waiting for it returns once Abort
// cuts it short.
func TestTLS_PostSendDoesNotBlockOnStalledPeer(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	peer := startStalledTLSPeer(t, ca)
	ep := newEndpoint(t, QPCaps{SendDepth: 512})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ep.qp.Connect(ctx, "tcp", peer, WithTLS(ca.Client(t, "")), WithCRC(CRCOff)))
	require.NotNil(t, ep.qp.eng.tlsw, "the TLS stream has no write-behind layer")
	small := ep.register(t, 64, 0)
	big := ep.register(t, 4<<20, 0)
	posted := 0
	post := func(wr SendWR) {
		var err error
		returnsWithin(t, hangLimit, "PostSend", func() { err = ep.qp.PostSend(wr) })
		if errors.Is(err, ErrSQFull) || errors.Is(err, ErrCQFull) {
			return
		}
		require.NoError(t, err)
		posted++
	}
	// Small Sends apart in time are inline posts; the Writes then fill
	// the socket and the backlog behind it; the Sends after them find the
	// transmitter stuck.
	for i := range 16 {
		post(SendWR{ID: uint64(i), Op: OpSend, SGL: []SGE{small.SGE(0, 64)}})
		time.Sleep(50 * time.Microsecond)
	}
	for i := range 4 {
		post(SendWR{ID: uint64(100 + i), Op: OpWrite, SGL: []SGE{big.SGE(0, 4<<20)}, Remote: RemoteAddr{STag: 0x100}})
	}
	for i := range 64 {
		post(SendWR{ID: uint64(200 + i), Op: OpSend, SGL: []SGE{small.SGE(0, 64)}})
		time.Sleep(50 * time.Microsecond)
	}
	require.Positive(t, posted)
	// Close waits for the stuck writes (up to DefaultCloseTimeout); Abort
	// cuts it short, and both return.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		ep.qp.Close()
	}()
	time.Sleep(100 * time.Millisecond)
	returnsWithin(t, hangLimit, "Abort", func() { ep.qp.Abort() })
	select {
	case <-closed:
	case <-time.After(hangLimit):
		t.Fatal("Close did not return after Abort")
	}
	<-ep.qp.Done()
	require.ErrorIs(t, ep.qp.Err(), ErrQPClosed)
}
