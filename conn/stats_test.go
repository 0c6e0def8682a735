package conn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// The counters say exactly what a known exchange did, per queue pair and
// for the device (closed queue pairs included).
func TestStats_CountWhatHappened(t *testing.T) {
	checkLeaks(t)
	dev, err := NewDevice()
	require.NoError(t, err)
	pd := dev.NewPD()
	ccq, scq := NewCQ(64), NewCQ(64)
	client, err := pd.NewQP(ccq, QPCaps{})
	require.NoError(t, err)
	server, err := pd.NewQP(scq, QPCaps{})
	require.NoError(t, err)
	src, err := pd.Register(make([]byte, 256), LocalWrite)
	require.NoError(t, err)
	dst, err := pd.Register(make([]byte, 256), LocalWrite|RemoteWrite|RemoteRead)
	require.NoError(t, err)
	require.NoError(t, server.PostRecv(RecvWR{ID: 1, SGL: []SGE{dst.SGE(128, 64)}}))
	require.NoError(t, server.PostRecv(RecvWR{ID: 2, SGL: []SGE{dst.SGE(192, 64)}}))

	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server) }()
	require.NoError(t, client.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)

	wrs := []SendWR{
		{ID: 10, Op: OpWrite, SGL: []SGE{src.SGE(0, 100)}, Remote: dst.Remote(0)},
		{ID: 11, Op: OpWrite, SGL: []SGE{src.SGE(0, 100)}, Remote: dst.Remote(0)},
		{ID: 12, Op: OpWrite, SGL: []SGE{src.SGE(0, 100)}, Remote: dst.Remote(0)},
		{ID: 13, Op: OpSend, SGL: []SGE{src.SGE(0, 10)}},
		{ID: 14, Op: OpSend, SGL: []SGE{src.SGE(0, 20)}},
		{ID: 15, Op: OpRead, Flags: Signaled, SGL: []SGE{src.SGE(128, 64)}, Remote: dst.Remote(0)},
	}
	_, err = client.PostSendBatch(wrs)
	require.NoError(t, err)
	var wc [4]WorkCompletion
	n, err := ccq.Wait(ctx, wc[:1])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, wc[0].Err())
	for got := 0; got < 2; {
		n, err := scq.Wait(ctx, wc[:])
		require.NoError(t, err)
		got += n
	}

	cs, ss := client.Stats(), server.Stats()
	// The client's first FPDU is its zero-length Write RTR.
	require.Equal(t, uint64(4), cs.FPDUsSent[rdmap.OpWrite])
	require.Equal(t, uint64(3*(14+100)+14), cs.BytesSent[rdmap.OpWrite])
	require.Equal(t, cs.FPDUsSent[rdmap.OpWrite], ss.FPDUsReceived[rdmap.OpWrite])
	require.Equal(t, cs.BytesSent[rdmap.OpWrite], ss.BytesReceived[rdmap.OpWrite])
	require.Equal(t, uint64(2), ss.FPDUsReceived[rdmap.OpSend])
	require.Equal(t, uint64(2*18+30), ss.BytesReceived[rdmap.OpSend])
	require.Equal(t, uint64(1), cs.FPDUsSent[rdmap.OpReadRequest])
	require.Equal(t, uint64(rdmap.ReadRequestHeaderLen), cs.BytesSent[rdmap.OpReadRequest])
	require.Equal(t, uint64(1), ss.FPDUsSent[rdmap.OpReadResponse])
	require.Equal(t, uint64(14+64), cs.BytesReceived[rdmap.OpReadResponse])
	require.Equal(t, uint64(1), cs.ReadsIssued)
	require.Equal(t, uint64(1), ss.ReadsQueued)
	require.Zero(t, ss.ReadsHeld)
	require.Zero(t, cs.CRCErrors+ss.CRCErrors)
	require.Equal(t, uint64(1), cs.Connections)
	require.NotZero(t, cs.SetupNanos)
	sent, recv := cs.FPDUs()
	require.Equal(t, uint64(4+2+1), sent)
	require.Equal(t, uint64(1), recv)

	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	d := dev.Stats()
	require.Equal(t, uint64(2), d.Connections)
	require.Equal(t, uint64(2), d.Closed)
	require.Equal(t, cs.FPDUsSent[rdmap.OpWrite], d.FPDUsSent[rdmap.OpWrite], "closed queue pairs stay in the device totals")
	require.Equal(t, uint64(1), d.FPDUsReceived[rdmap.OpReadRequest])
}

// Terminates are counted by code on both ends.
func TestStats_Terminates(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dial(mpa.Config{IRD: 1, ORD: 1})
	p.send(uTagged(rdmap.OpWrite, true, 0xbad00, 0, []byte("x")))
	p.terminate()
	<-s.qp.finished
	st := s.qp.Stats()
	require.Equal(t, uint64(1), st.TerminatesSent[termcode.DDPTaggedInvalidSTag])
	require.Equal(t, uint64(1), st.FPDUsSent[rdmap.OpTerminate])
	require.Empty(t, st.TerminatesReceived)

	s2 := newHostileServer(t)
	p2 := s2.dial(mpa.Config{IRD: 1, ORD: 1})
	p2.send(append([]byte{0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}, 0x20, 0x02, 0, 0))
	select {
	case <-s2.qp.finished:
	case <-time.After(hangLimit):
		t.Fatal("the peer's Terminate did not end the connection")
	}
	require.Equal(t, uint64(1), s2.qp.Stats().TerminatesReceived[termcode.MPACRC])
}

// The rejects a listener sends are counted by why it sent them, and the
// rejects an initiator receives reach its device's totals although its
// queue pair never lived.
func TestStats_Rejects(t *testing.T) {
	checkLeaks(t)
	dev, err := NewDevice()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	rejected := make(chan error, 1)
	go func() {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			rejected <- err
			return
		}
		rejected <- cr.Reject(ctx, []byte("no"))
	}()
	qp, err := dev.NewPD().NewQP(NewCQ(8), QPCaps{})
	require.NoError(t, err)
	require.ErrorIs(t, qp.Connect(ctx, "tcp", ln.Addr().String()), mpa.ErrRejected)
	require.NoError(t, <-rejected)
	require.Equal(t, uint64(1), qp.Stats().RejectsReceived)
	require.Equal(t, uint64(1), dev.Stats().RejectsReceived)
	require.Equal(t, uint64(1), ln.Stats().Rejected)

	// A malformed Request is not a reject: the listener closes it
	// (RFC 6581 §6 and RFC 5044 §7.1.2 rule 2) and counts a bad request.
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(append([]byte(mpa.RequestKey), byte(mpa.FlagEnhanced), 2, 0, 0))
	require.NoError(t, err)
	eventually(t, "bad request counted", func() bool { return ln.Stats().BadRequests == 1 })
	require.Equal(t, uint64(1), ln.Stats().Rejected, "unchanged")
}
