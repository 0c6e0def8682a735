package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/stretchr/testify/require"
)

// TestSendWithInvalidate_RFC5040_5_3: a Send with Invalidate invalidates
// the named STag at the receiver before the receive completes, and the
// completion says which STag.
func TestSendWithInvalidate_RFC5040_5_3(t *testing.T) {
	checkLeaks(t)
	var rbuf *MR
	client, server := connectPair(t, pairConfig{beforeAccept: postOneRecv(t, &rbuf)})
	exposed := server.register(t, 64, LocalWrite|RemoteWrite)
	src := client.register(t, 8, 0)
	// The exposed region works before...
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 8)}, Remote: exposed.Remote(0)}))
	client.waitOK(t, WCRDMAWrite)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSendInv, InvSTag: exposed.STag(), SGL: []SGE{src.SGE(0, 8)}}))
	wc := server.waitOK(t, WCRecv)
	require.Equal(t, WCWithInv, wc.Flags&WCWithInv)
	require.Equal(t, uint32(exposed.STag()), wc.InvSTag)
	// ...and not after: the next Write to it is a protection error that
	// ends the connection.
	require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 8)}, Remote: exposed.Remote(0)}))
	<-client.qp.Done()
	<-server.qp.Done()
	require.Error(t, server.qp.Err())
}

// TestSolicited: WaitSolicited wakes for a Send with Solicited Event, not
// for a plain Send.
func TestSolicited_RFC5040_5_3(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{beforeAccept: func(s *endpoint) {
		for i := 0; i < 2; i++ {
			require.NoError(t, s.qp.PostRecv(RecvWR{ID: uint64(10 + i)}))
		}
	}})
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpSend}))
	// The plain Send arrives but does not wake a solicited wait.
	require.Eventually(t, func() bool { return server.cq.Len() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var wcs [4]WorkCompletion
	_, err := server.cq.WaitSolicited(ctx, wcs[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSend, Flags: Solicited}))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	n, err := server.cq.WaitSolicited(ctx2, wcs[:])
	require.NoError(t, err)
	for n < 2 { // the solicited completion may be polled with the plain one
		m, err := server.cq.Wait(ctx2, wcs[n:])
		require.NoError(t, err)
		n += m
	}
	require.Equal(t, WCFlags(0), wcs[0].Flags&WCSolicited)
	require.Equal(t, WCSolicited, wcs[1].Flags&WCSolicited)
}

// TestLocalInvalidate: a local invalidate in send-queue order makes the
// region unusable for the peer.
func TestLocalInvalidate(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	mine := client.register(t, 64, LocalWrite|RemoteRead)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpLocalInv, Flags: Signaled, InvSTag: mine.STag()}))
	client.waitOK(t, WCLocalInv)
	sink := server.register(t, 64, LocalWrite)
	require.NoError(t, server.qp.PostSend(SendWR{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 64)}, Remote: mine.Remote(0)}))
	wc := server.wait(t)
	require.Equal(t, WCRDMARead, wc.Op)
	require.Error(t, wc.Err())
	<-server.qp.Done()
}

// TestOrdering_RFC5040_5_5: Sends complete in posting order, Reads in
// request order, a fenced Send waits for earlier Reads, and a Write
// followed by a Send is placed before the Send completes at the target.
func TestOrdering_RFC5040_5_5(t *testing.T) {
	checkLeaks(t)
	const n = 32
	var rbuf *MR
	client, server := connectPair(t, pairConfig{
		caps:       QPCaps{SendDepth: 4 * n, RecvDepth: n},
		clientOpts: []Option{WithIRDORD(4, 4)},
		serverOpts: []Option{WithIRDORD(4, 4)},
		beforeAccept: func(s *endpoint) {
			rbuf = s.register(t, n*8, LocalWrite)
			for i := 0; i < n; i++ {
				require.NoError(t, s.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{rbuf.SGE(i*8, 8)}}))
			}
		},
	})
	target := server.register(t, n*4096, LocalWrite|RemoteWrite|RemoteRead)
	src := client.register(t, n*4096, LocalWrite)
	copy(src.Bytes(), pattern(n*4096, 5))
	sink := client.register(t, n*4096, LocalWrite)
	var wrs []SendWR
	for i := 0; i < n; i++ {
		// Write i, then a Send naming it: the target checks block i is in
		// place when Send i completes.
		wrs = append(wrs,
			SendWR{ID: uint64(3 * i), Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(i*4096, 4096)}, Remote: target.Remote(i * 4096)},
			SendWR{ID: uint64(3*i + 1), Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(i*4096, 4096)}, Remote: target.Remote(i * 4096)},
			SendWR{ID: uint64(3*i + 2), Op: OpSend, Flags: Signaled | Fence, SGL: []SGE{src.SGE(i*4096, 8)}},
		)
	}
	posted, err := client.qp.PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), posted)
	for i := 0; i < len(wrs); i++ {
		wc := client.wait(t)
		require.NoError(t, wc.Err())
		require.Equal(t, uint64(i), wc.ID, "send-queue completions in posting order")
		if wc.Op == WCRDMARead {
			k := i / 3
			require.Equal(t, src.Bytes()[k*4096:(k+1)*4096], sink.Bytes()[k*4096:(k+1)*4096])
		}
	}
	for i := 0; i < n; i++ {
		wc := server.waitOK(t, WCRecv)
		require.Equal(t, uint64(i), wc.ID, "receives complete in order")
		require.Equal(t, src.Bytes()[i*4096:i*4096+8], rbuf.Bytes()[i*8:i*8+8])
		require.Equal(t, src.Bytes()[i*4096:(i+1)*4096], target.Bytes()[i*4096:(i+1)*4096], "Write %d placed before the Send after it", i)
	}
}

// TestPosting_Limits: queue and CQ capacity are enforced at post time with
// clear errors; a busy region cannot be deregistered.
func TestPosting_Limits(t *testing.T) {
	pd := NewPD()
	cq := NewCQ(3)
	qp, err := pd.NewQP(cq, QPCaps{SendDepth: 2, RecvDepth: 2, MaxSendSGE: 1})
	require.NoError(t, err)
	mr, err := pd.Register(make([]byte, 64), LocalWrite)
	require.NoError(t, err)
	require.NoError(t, qp.PostSend(SendWR{ID: 1, Op: OpSend, SGL: []SGE{mr.SGE(0, 8)}}))
	require.ErrorIs(t, mr.Deregister(), ErrMRBusy)
	require.ErrorIs(t, qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{mr.SGE(0, 8), mr.SGE(8, 8)}}), ErrInvalidWR)
	require.ErrorIs(t, qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{mr.SGE(60, 8)}}), ErrInvalidWR)
	require.NoError(t, qp.PostSend(SendWR{ID: 2, Op: OpSend}))
	require.ErrorIs(t, qp.PostSend(SendWR{Op: OpSend}), ErrSQFull)
	require.NoError(t, qp.PostRecv(RecvWR{ID: 3}))
	require.ErrorIs(t, qp.PostRecv(RecvWR{ID: 4}), ErrCQFull)
	other := NewPD()
	omr, err := other.Register(make([]byte, 8), LocalWrite)
	require.NoError(t, err)
	require.ErrorIs(t, qp.PostRecv(RecvWR{SGL: []SGE{omr.SGE(0, 8)}}), ErrInvalidWR)

	// Closing an unconnected QP flushes everything, in order.
	require.NoError(t, qp.Close())
	var wcs [8]WorkCompletion
	n := cq.Poll(wcs[:])
	require.Equal(t, 3, n)
	for i, id := range []uint64{1, 2, 3} {
		require.Equal(t, id, wcs[i].ID)
		require.Equal(t, WCWRFlushErr, wcs[i].Status)
		require.ErrorIs(t, wcs[i].Err(), ErrFlushed)
	}
	require.NoError(t, mr.Deregister())
	require.ErrorIs(t, qp.PostSend(SendWR{Op: OpSend}), ErrQPClosed)
}

// TestClose_FlushesAndPeerSeesIt: a graceful close sends what was posted,
// flushes the receives, and the peer's QP reports the disconnect even
// though no work is posted there.
func TestClose_FlushesAndPeerSeesIt(t *testing.T) {
	checkLeaks(t)
	var sbuf *MR
	client, server := connectPair(t, pairConfig{beforeAccept: postOneRecv(t, &sbuf)})
	require.NoError(t, client.qp.PostRecv(RecvWR{ID: 77}))
	target := server.register(t, 1<<20, LocalWrite|RemoteWrite)
	src := client.register(t, 1<<20, 0)
	for i := 0; i < 4; i++ {
		require.NoError(t, client.qp.PostSend(SendWR{ID: uint64(i), Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 1<<20)}, Remote: target.Remote(0)}))
	}
	require.NoError(t, client.qp.Close())
	<-server.qp.Done()
	require.ErrorIs(t, server.qp.Err(), ErrPeerClosed)
	require.ErrorIs(t, client.qp.Err(), ErrQPClosed)
	// The Writes posted before Close were sent; the receive was flushed.
	var wcs [8]WorkCompletion
	n := client.cq.Poll(wcs[:])
	require.Equal(t, 5, n)
	for i := 0; i < 4; i++ {
		require.Equal(t, uint64(i), wcs[i].ID)
		require.NoError(t, wcs[i].Err())
	}
	require.Equal(t, WCRecv, wcs[4].Op)
	require.Equal(t, WCWRFlushErr, wcs[4].Status)
	// The server's posted receive is flushed too.
	require.Equal(t, WCWRFlushErr, server.wait(t).Status)
}

// TestAbort_PeerSeesReset: an abortive close resets the connection.
func TestAbort_PeerSeesReset(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	require.NoError(t, client.qp.Abort())
	<-server.qp.Done()
	err := server.qp.Err()
	require.True(t, errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrPeerClosed), "%v", err)
	_ = stag.OK
}
