package conn

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/stretchr/testify/require"
)

// exchange checks that both sides can send to each other at once after
// setup, with the server posting its message first.
func exchange(t *testing.T, client, server *endpoint, cBuf, sBuf *MR) {
	t.Helper()
	sSrc := server.register(t, 32, 0)
	copy(sSrc.Bytes(), "from the server")
	cSrc := client.register(t, 32, 0)
	copy(cSrc.Bytes(), "from the client")
	require.NoError(t, server.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{sSrc.SGE(0, 15)}}))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSend, Flags: Signaled, SGL: []SGE{cSrc.SGE(0, 15)}}))
	for _, ep := range []*endpoint{client, server} {
		var sent, recvd bool
		for !sent || !recvd {
			wc := ep.wait(t)
			require.NoError(t, wc.Err())
			switch wc.Op {
			case WCSend:
				sent = true
			case WCRecv:
				recvd = true
				require.Equal(t, uint32(15), wc.ByteLen)
			}
		}
	}
	require.Equal(t, "from the server", string(cBuf.Bytes()[:15]))
	require.Equal(t, "from the client", string(sBuf.Bytes()[:15]))
}

func postOneRecv(t *testing.T, buf **MR) func(*endpoint) {
	return func(ep *endpoint) {
		*buf = ep.register(t, 64, LocalWrite)
		require.NoError(t, ep.qp.PostRecv(RecvWR{ID: 50, SGL: []SGE{(*buf).SGE(0, 64)}}))
	}
}

// TestSetup_RFC6581_P2P runs every RTR type in both roles (the initiator
// offers, the responder picks) and checks what was negotiated and that
// data flows both ways, the server sending first.
func TestSetup_RFC6581_P2P(t *testing.T) {
	for _, rtr := range []RTR{RTRWrite, RTRRead, RTRSend} {
		t.Run(rtr.String(), func(t *testing.T) {
			checkLeaks(t)
			var cBuf, sBuf *MR
			client, server := connectPair(t, pairConfig{
				clientOpts:   []Option{WithP2P(rtr)},
				serverOpts:   []Option{WithP2P(RTRWrite | RTRRead | RTRSend)},
				beforeAccept: postOneRecv(t, &sBuf),
				beforeDial:   postOneRecv(t, &cBuf),
			})
			for _, ep := range []*endpoint{client, server} {
				n := ep.qp.Negotiated()
				require.NotNil(t, n)
				require.True(t, n.P2P)
				require.Equal(t, rtr, n.RTR)
			}
			exchange(t, client, server, cBuf, sBuf)
		})
	}
}

// TestSetup_ResponderHoldsUntilFirstFPDU: without peer-to-peer mode the
// responder posts first, but its Send goes out only after the initiator's
// first message. A siw initiator fails the connection when bytes follow
// the Reply in its first read (siw_recv_mpa_rr() in siw_cm.c); RFC 5044
// states the rule too as commonly cited, not checked against the text.
func TestSetup_ResponderHoldsUntilFirstFPDU(t *testing.T) {
	checkLeaks(t)
	var cBuf, sBuf *MR
	client, server := connectPair(t, pairConfig{
		clientOpts:   []Option{WithoutP2P()},
		beforeAccept: postOneRecv(t, &sBuf),
		beforeDial:   postOneRecv(t, &cBuf),
	})
	require.False(t, server.qp.Negotiated().P2P)
	sSrc := server.register(t, 8, 0)
	require.NoError(t, server.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{sSrc.SGE(0, 8)}}))
	// Nothing arrives at the client while it has sent nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var wc [1]WorkCompletion
	_, err := client.cq.Wait(ctx, wc[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = server.cq.Wait(ctx, wc[:])
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The client's first message releases the server's.
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSend}))
	// Send and receive completions of one CQ have no defined order.
	ops := map[WCOpcode]bool{}
	for i := 0; i < 2; i++ {
		wc := server.wait(t)
		require.NoError(t, wc.Err())
		ops[wc.Op] = true
	}
	require.Equal(t, map[WCOpcode]bool{WCRecv: true, WCSend: true}, ops)
	client.waitOK(t, WCRecv)
}

// TestSetup_RFC5044_7_1_2_ResponderSendFirst: with WithResponderSendFirst
// (an opt-in deviation from rule 4) a responder whose initiator sends
// nothing and negotiated no RTR sends after the delay, not before it.
func TestSetup_RFC5044_7_1_2_ResponderSendFirst(t *testing.T) {
	checkLeaks(t)
	var cBuf *MR
	client, server := connectPair(t, pairConfig{
		clientOpts: []Option{WithoutP2P()},
		serverOpts: []Option{WithResponderSendFirst(1500 * time.Millisecond)},
		beforeDial: postOneRecv(t, &cBuf),
	})
	sSrc := server.register(t, 8, 0)
	copy(sSrc.Bytes(), "first!!!")
	require.NoError(t, server.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{sSrc.SGE(0, 8)}}))
	// Not at once: the delay holds it.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wcs [1]WorkCompletion
	_, err := client.cq.Wait(ctx, wcs[:])
	require.ErrorIs(t, err, context.DeadlineExceeded, "the responder sent before its delay")
	// Then without any FPDU from the initiator.
	wc := client.waitOK(t, WCRecv)
	require.Equal(t, uint32(8), wc.ByteLen)
	require.Equal(t, "first!!!", string(cBuf.Bytes()[:8]))
	server.waitOK(t, WCSend)
	st := client.qp.Stats()
	sent, _ := st.FPDUs()
	require.Zero(t, sent, "the initiator sent nothing")
}

// TestSetup_ClientSendsBeforeConnect: sends posted before Connect are held
// and go out once connected.
func TestSetup_SendsPostedBeforeConnect(t *testing.T) {
	checkLeaks(t)
	var sBuf *MR
	var early *MR
	client, server := connectPair(t, pairConfig{
		beforeAccept: postOneRecv(t, &sBuf),
		beforeDial: func(c *endpoint) {
			early = c.register(t, 5, 0)
			copy(early.Bytes(), "early")
			require.NoError(t, c.qp.PostSend(SendWR{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{early.SGE(0, 5)}}))
		},
	})
	client.waitOK(t, WCSend)
	require.Equal(t, uint32(5), server.waitOK(t, WCRecv).ByteLen)
	require.Equal(t, "early", string(sBuf.Bytes()[:5]))
}

// TestSetup_Rev1_PeerIRD: MPA revision 1 exchanges no IRD/ORD; the
// initiator then keeps to the peer IRD given by option.
func TestSetup_Rev1_PeerIRD(t *testing.T) {
	for _, network := range []string{"tcp", "pipe"} {
		t.Run(network, func(t *testing.T) {
			checkLeaks(t)
			client, server := connectPair(t, pairConfig{
				network:    network,
				clientOpts: []Option{WithMPARevision(1), WithPeerIRD(2)},
				serverOpts: []Option{WithIRDORD(2, 2)},
			})
			n := client.qp.Negotiated()
			require.Equal(t, uint8(1), n.Revision)
			require.False(t, n.IRDORDKnown)
			_, ord := client.qp.ReadLimits()
			require.Equal(t, 2, ord)
			source := server.register(t, 4096, RemoteRead)
			copy(source.Bytes(), pattern(4096, 4))
			sink := client.register(t, 8*4096, LocalWrite)
			// Eight Reads with two allowed outstanding: queued, not failed.
			for i := 0; i < 8; i++ {
				require.NoError(t, client.qp.PostSend(SendWR{ID: uint64(i), Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(i*4096, 4096)}, Remote: source.Remote(0)}))
			}
			for i := 0; i < 8; i++ {
				wc := client.waitOK(t, WCRDMARead)
				require.Equal(t, uint64(i), wc.ID, "Reads complete in order")
				require.Equal(t, source.Bytes(), sink.Bytes()[i*4096:(i+1)*4096])
			}
		})
	}
}

// TestSetup_RejectWithPrivateData: the responder inspects the private data
// and refuses; the initiator sees the refusal and the responder's data.
func TestSetup_RejectWithPrivateData(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			got <- nil
			return
		}
		got <- append([]byte(nil), cr.PrivateData()...)
		cr.Reject(ctx, []byte("go away"))
	}()
	client := newEndpoint(t, QPCaps{})
	err = client.qp.Connect(ctx, "tcp", ln.Addr().String(), WithPrivateData([]byte("let me in")))
	require.Error(t, err)
	var rej *mpa.RejectedError
	require.True(t, errors.As(err, &rej), "%v", err)
	require.Equal(t, "go away", string(rej.PrivateData))
	require.Equal(t, "let me in", string(<-got))
	require.ErrorIs(t, client.qp.Err(), mpa.ErrRejected)
	<-client.qp.Done()
}

// TestSetup_AcceptPrivateData: private data travels both ways and the
// iwarp-go trailer is not visible to the application.
func TestSetup_AcceptPrivateData(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	server := newEndpoint(t, QPCaps{})
	errc := make(chan error, 1)
	go func() {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			errc <- err
			return
		}
		if string(cr.PrivateData()) != "hello" || !cr.PeerIsIwarpGo() {
			errc <- errors.New("unexpected request private data")
			cr.Reject(ctx, nil)
			return
		}
		errc <- cr.Accept(ctx, server.qp, WithPrivateData([]byte("welcome")))
	}()
	client := newEndpoint(t, QPCaps{})
	require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String(), WithPrivateData([]byte("hello"))))
	require.NoError(t, <-errc)
	require.Equal(t, "welcome", string(client.qp.Negotiated().PeerPrivateData))
	require.True(t, client.qp.PeerIsIwarpGo())
	client.qp.Close()
	server.qp.Close()
}

// TestSetup_ContextBoundsConnect: a responder that never answers is cut off
// by the context; the queue pair fails cleanly.
func TestSetup_ContextBoundsConnect(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	silent := make(chan struct{})
	go func() {
		defer close(silent)
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c) // read the Request, never answer
		}
	}()
	defer func() { <-silent }()
	client := newEndpoint(t, QPCaps{})
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	err = client.qp.Connect(sctx, "tcp", ln.Addr().String())
	require.Error(t, err)
	<-client.qp.Done()
	require.Error(t, client.qp.Err())
}
