package conn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// srqServer is a listener whose queue pairs all take their receives from
// one shared receive queue.
type srqServer struct {
	t   *testing.T
	pd  *PD
	srq *SRQ
	ln  *Listener
}

func newSRQServer(t *testing.T, caps SRQCaps) *srqServer {
	t.Helper()
	s := &srqServer{t: t, pd: NewPD()}
	var err error
	s.srq, err = s.pd.NewSRQ(caps)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s.ln, err = Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { s.ln.Close() })
	return s
}

// accept creates a queue pair bound to the SRQ (completing on cq) and
// accepts the next connection into it in the background; wait returns
// Accept's error.
func (s *srqServer) accept(cq *CQ) (qp *QP, wait func() error) {
	s.t.Helper()
	qp, err := s.pd.NewQP(cq, QPCaps{SRQ: s.srq})
	require.NoError(s.t, err)
	s.t.Cleanup(func() { qp.Close() })
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc <- s.ln.Accept(ctx, qp)
	}()
	return qp, func() error { return <-errc }
}

// dialGo connects an iwarp-go client (its own PD and CQ) to the server.
func (s *srqServer) dialGo(caps QPCaps) *endpoint {
	s.t.Helper()
	ep := newEndpoint(s.t, caps)
	s.t.Cleanup(func() { ep.qp.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(s.t, ep.qp.Connect(ctx, "tcp", s.ln.Addr().String()))
	return ep
}

// dialRaw connects a raw MPA peer that speaks hand-built FPDUs.
func (s *srqServer) dialRaw() *rawPeer {
	s.t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	require.NoError(s.t, err)
	s.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := mpa.Connect(ctx, c, &mpa.Config{IRD: 1, ORD: 1}, nil)
	require.NoError(s.t, err)
	return &rawPeer{t: s.t, c: c, res: res, r: mpa.NewReader(c, mpa.ReaderConfig{CRC: res.CRC, Markers: res.RecvMarkers})}
}

func waitCQ(t *testing.T, cq *CQ) WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	var wc [1]WorkCompletion
	_, err := cq.Wait(ctx, wc[:])
	require.NoError(t, err, "waiting for a completion")
	return wc[0]
}

func noLimitEvent(t *testing.T, s *SRQ, when string) {
	t.Helper()
	select {
	case <-s.LimitReached():
		t.Fatalf("limit event %s", when)
	default:
	}
}

// Sixteen connections at once send into one SRQ, in two rounds (the SRQ
// refilled between them). Messages are longer than a 64 KiB FPDU, so the
// segments of messages of different queue pairs interleave while each
// holds its own receive, and the receives have two SGEs each. Every byte
// and every completion is checked: each message lands whole in the
// receive its queue pair took, in order per queue pair, with its QPN.
func TestSRQ_SixteenConnectionsShareOne(t *testing.T) {
	checkLeaks(t)
	const (
		conns    = 16
		perRound = 6
		rounds   = 2
		slot     = 72 << 10
		depth    = conns * perRound
	)
	s := newSRQServer(t, SRQCaps{Depth: depth, MaxSGE: 2})
	buf := make([]byte, depth*slot)
	mr, err := s.pd.Register(buf, LocalWrite)
	require.NoError(t, err)
	post := func() {
		for i := 0; i < depth; i++ {
			off := i * slot
			require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{mr.SGE(off, slot/3), mr.SGE(off+slot/3, slot-slot/3)}}))
		}
	}
	post()
	rcq := NewCQ(depth) // room for every receive: the server posts no sends

	servers := make([]*QP, conns)
	index := map[uint32]int{} // QPN → connection
	clients := make([]*endpoint, conns)
	for c := range conns {
		var wait func() error
		servers[c], wait = s.accept(rcq)
		clients[c] = s.dialGo(QPCaps{SendDepth: perRound})
		require.NoError(t, wait())
		index[servers[c].QPN()] = c
	}
	msgLen := func(c, r, m int) int { return 8 + (c*7919+r*104729+m*31337)%(slot-8) }
	msg := func(c, r, m int) []byte {
		b := pattern(msgLen(c, r, m), byte(c*31+r*7+m))
		binary.BigEndian.PutUint32(b[0:], uint32(c))
		binary.BigEndian.PutUint16(b[4:], uint16(r))
		binary.BigEndian.PutUint16(b[6:], uint16(m))
		return b
	}

	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ep := clients[c]
				var src []byte
				for m := range perRound {
					src = append(src, msg(c, r, m)...)
				}
				smr, err := ep.pd.Register(src, 0)
				if err != nil {
					errs <- err
					return
				}
				off := 0
				for m := range perRound {
					n := msgLen(c, r, m)
					if err := ep.qp.PostSend(SendWR{ID: uint64(m), Op: OpSend, Flags: Signaled, SGL: []SGE{smr.SGE(off, n)}}); err != nil {
						errs <- err
						return
					}
					off += n
				}
				ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
				defer cancel()
				var wcs [perRound]WorkCompletion
				for got := 0; got < perRound; {
					n, err := ep.cq.Wait(ctx, wcs[:])
					if err != nil {
						errs <- err
						return
					}
					for _, wc := range wcs[:n] {
						if wc.Status != WCSuccess || wc.Op != WCSend || wc.ID != uint64(got) {
							errs <- errors.New("client: unexpected send completion " + wc.Status.String())
							return
						}
						got++
					}
				}
				errs <- smr.Deregister()
			}()
		}

		next := make([]int, conns) // next message expected per connection
		for range depth {
			wc := waitCQ(t, rcq)
			require.NoError(t, wc.Err())
			require.Equal(t, WCRecv, wc.Op)
			c, ok := index[wc.QPN]
			require.True(t, ok, "completion of unknown QPN %d", wc.QPN)
			require.Less(t, wc.ID, uint64(depth))
			got := buf[int(wc.ID)*slot : int(wc.ID)*slot+int(wc.ByteLen)]
			require.GreaterOrEqual(t, len(got), 8)
			require.Equal(t, uint32(c), binary.BigEndian.Uint32(got[0:]), "message from another connection on QPN %d", wc.QPN)
			require.Equal(t, uint16(r), binary.BigEndian.Uint16(got[4:]))
			m := int(binary.BigEndian.Uint16(got[6:]))
			require.Equal(t, next[c], m, "connection %d: messages out of order", c)
			require.True(t, bytes.Equal(msg(c, r, m), got), "connection %d message %d: bytes differ", c, m)
			next[c]++
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for c := range conns {
			require.Equal(t, perRound, next[c], "connection %d", c)
		}
		require.Equal(t, 0, s.srq.Len())
		require.Equal(t, 0, rcq.Poll(make([]WorkCompletion, 1)), "a completion too many")
		if r < rounds-1 {
			post()
		}
	}
	for c := range conns {
		clients[c].qp.Close()
		servers[c].Close()
	}
	require.NoError(t, s.srq.Close())
	require.NoError(t, mr.Deregister())
}

// The limit event fires once when a taken receive leaves fewer than the
// armed limit posted, then disarms (IBV_EVENT_SRQ_LIMIT_REACHED); arming
// below the limit fires at once; Arm(0) disarms.
func TestSRQ_LimitEvent(t *testing.T) {
	checkLeaks(t)
	s := newSRQServer(t, SRQCaps{Depth: 8})
	mr, err := s.pd.Register(make([]byte, 8*64), LocalWrite)
	require.NoError(t, err)
	for i := range 8 {
		require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{mr.SGE(i*64, 64)}}))
	}
	cq := NewCQ(16)
	qp, wait := s.accept(cq)
	client := s.dialGo(QPCaps{})
	require.NoError(t, wait())
	src := client.register(t, 16, 0)
	send := func() {
		t.Helper()
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{src.SGE(0, 16)}}))
		wc := waitCQ(t, cq)
		require.NoError(t, wc.Err())
		require.Equal(t, qp.QPN(), wc.QPN)
	}

	require.Error(t, s.srq.Arm(9), "a limit above the depth")
	require.Error(t, s.srq.Arm(-1))
	require.NoError(t, s.srq.Arm(5))
	for range 3 {
		send()
	}
	require.Equal(t, 5, s.srq.Len())
	noLimitEvent(t, s.srq, "with as many receives posted as the limit")
	send() // 4 left: below 5
	select {
	case <-s.srq.LimitReached():
	default:
		t.Fatal("no limit event with fewer receives posted than the limit")
	}
	send() // 3 left: disarmed, no second event
	noLimitEvent(t, s.srq, "after it disarmed")

	require.NoError(t, s.srq.Arm(4)) // 3 < 4: at once
	select {
	case <-s.srq.LimitReached():
	default:
		t.Fatal("arming above the posted count did not fire")
	}
	require.NoError(t, s.srq.Arm(2))
	require.NoError(t, s.srq.Arm(0))
	send()
	send() // 1 left, below 2, but disarmed
	noLimitEvent(t, s.srq, "after Arm(0)")
	require.Equal(t, 1, s.srq.Len())
}

// The API's refusals: a bound queue pair's own PostRecv, another PD's
// SRQ, a full SRQ, too many SGEs, destroying an SRQ in use; closing an
// unused SRQ drops its receives and releases their regions.
func TestSRQ_Refusals(t *testing.T) {
	checkLeaks(t)
	pd := NewPD()
	_, err := pd.NewSRQ(SRQCaps{Depth: MaxQueueDepth + 1})
	require.ErrorIs(t, err, ErrBadOption)
	_, err = pd.NewSRQ(SRQCaps{MaxSGE: -1})
	require.ErrorIs(t, err, ErrBadOption)
	srq, err := pd.NewSRQ(SRQCaps{Depth: 2, MaxSGE: 1})
	require.NoError(t, err)
	require.Equal(t, SRQCaps{Depth: 2, MaxSGE: 1}, srq.Caps())
	mr, err := pd.Register(make([]byte, 128), LocalWrite)
	require.NoError(t, err)

	cq := NewCQ(8)
	_, err = NewPD().NewQP(cq, QPCaps{SRQ: srq})
	require.ErrorIs(t, err, ErrBadOption, "an SRQ of another PD")
	qp, err := pd.NewQP(cq, QPCaps{SRQ: srq})
	require.NoError(t, err)
	require.ErrorIs(t, qp.PostRecv(RecvWR{SGL: []SGE{mr.SGE(0, 64)}}), ErrQPUsesSRQ)

	require.ErrorIs(t, srq.PostRecv(RecvWR{SGL: []SGE{mr.SGE(0, 8), mr.SGE(8, 8)}}), ErrInvalidWR)
	require.ErrorIs(t, srq.PostRecv(RecvWR{SGL: []SGE{mr.SGE(100, 64)}}), ErrInvalidWR, "out of the region")
	ro, err := pd.Register(make([]byte, 64), 0)
	require.NoError(t, err)
	require.ErrorIs(t, srq.PostRecv(RecvWR{SGL: []SGE{ro.SGE(0, 64)}}), ErrInvalidWR, "no local write")
	n, err := srq.PostRecvBatch([]RecvWR{{SGL: []SGE{mr.SGE(0, 64)}}, {SGL: []SGE{mr.SGE(64, 64)}}, {SGL: []SGE{mr.SGE(0, 64)}}})
	require.ErrorIs(t, err, ErrSRQFull)
	require.Equal(t, 2, n)
	require.Equal(t, 2, srq.Len())
	require.Error(t, mr.Deregister(), "a region of posted receives")

	require.ErrorIs(t, srq.Close(), ErrSRQBusy)
	require.Equal(t, 2, srq.Len(), "a refused Close changes nothing")
	require.NoError(t, qp.Close())
	require.NoError(t, srq.Close())
	require.NoError(t, srq.Close(), "closing twice")
	require.Equal(t, 0, srq.Len())
	require.ErrorIs(t, srq.PostRecv(RecvWR{SGL: []SGE{mr.SGE(0, 64)}}), ErrSRQClosed)
	require.ErrorIs(t, srq.Arm(1), ErrSRQClosed)
	_, err = pd.NewQP(cq, QPCaps{SRQ: srq})
	require.ErrorIs(t, err, ErrSRQClosed)
	require.NoError(t, mr.Deregister(), "Close released the receives' regions")
	require.Equal(t, 0, cq.Len(), "receives dropped by Close complete nothing")
}

// A queue pair that closes with a message half received flushes only the
// receive that message took, on its own CQ (WCWRFlushErr); the SRQ's other
// receives stay posted and serve the next queue pair (RFC 5040 §5.2: a
// message's receive is consumed when its first segment arrives).
func TestSRQ_QPClosesMidMessage(t *testing.T) {
	checkLeaks(t)
	s := newSRQServer(t, SRQCaps{Depth: 4})
	mr, err := s.pd.Register(make([]byte, 4*256), LocalWrite)
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(100 + i), SGL: []SGE{mr.SGE(i*256, 256)}}))
	}
	cqA, cqB := NewCQ(8), NewCQ(8)
	qpA, waitA := s.accept(cqA)
	peerA := s.dialRaw()
	require.NoError(t, waitA())
	qpB, waitB := s.accept(cqB)
	peerB := s.dialRaw()
	require.NoError(t, waitB())

	peerA.send(uSend(rdmap.OpSend, false, 0, 0, 1, 0, pattern(100, 1)))
	eventually(t, "queue pair A takes a receive", func() bool { return s.srq.Len() == 3 })
	require.NoError(t, qpA.Close())
	wc := waitCQ(t, cqA)
	require.Equal(t, WCWRFlushErr, wc.Status)
	require.Equal(t, WCRecv, wc.Op)
	require.Equal(t, uint64(100), wc.ID)
	require.Equal(t, qpA.QPN(), wc.QPN)
	require.Equal(t, 0, cqA.Len(), "only the taken receive is flushed")
	require.Equal(t, 3, s.srq.Len(), "the SRQ keeps its other receives")

	data := pattern(50, 2)
	peerB.send(uSend(rdmap.OpSend, true, 0, 0, 1, 0, data))
	wc = waitCQ(t, cqB)
	require.NoError(t, wc.Err())
	require.Equal(t, uint64(101), wc.ID)
	require.Equal(t, qpB.QPN(), wc.QPN)
	require.Equal(t, uint32(50), wc.ByteLen)
	require.Equal(t, data, mr.Bytes()[256:256+50])
	require.Equal(t, 2, s.srq.Len())
}

// A queue pair whose receive CQ is full when a Send's first segment
// arrives cannot take a receive: the receive stays on the SRQ and the
// connection ends with an RDMAP Local Catastrophic Error Terminate (the
// CQ overrun of verbs), its error wrapping ErrCQFull.
func TestSRQ_CQFull(t *testing.T) {
	checkLeaks(t)
	s := newSRQServer(t, SRQCaps{Depth: 4})
	mr, err := s.pd.Register(make([]byte, 4*64), LocalWrite)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{mr.SGE(i*64, 64)}}))
	}
	cq := NewCQ(1)
	qp, wait := s.accept(cq)
	peer := s.dialRaw()
	require.NoError(t, wait())

	peer.send(uSend(rdmap.OpSend, true, 0, 0, 1, 0, pattern(10, 1)))
	eventually(t, "the first Send completes", func() bool { return cq.Len() == 1 })
	peer.send(uSend(rdmap.OpSend, true, 0, 0, 2, 0, pattern(10, 2)))
	got := peer.terminate()
	require.Equal(t, wantTerminate(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), got)

	<-qp.Done()
	require.ErrorIs(t, qp.Err(), ErrCQFull)
	var te *rdmap.TerminateError
	require.True(t, errors.As(qp.Err(), &te), "QP error %v", qp.Err())
	require.False(t, te.Remote)
	require.Equal(t, rdmap.RDMAPLocalCatastrophic.Code(), te.Code)
	<-qp.finished
	require.Equal(t, 2, s.srq.Len(), "the receive the full CQ could not take stays on the SRQ")
	var wcs [4]WorkCompletion
	require.Equal(t, 1, cq.Poll(wcs[:]))
	require.NoError(t, wcs[0].Err())
	require.Equal(t, uint64(0), wcs[0].ID)
}

// A Send that finds the SRQ empty gets the Terminate a queue pair's own
// empty receive queue gets (RFC 5041 §7.2: no buffer available).
func TestSRQ_Empty_RFC5041_7_2(t *testing.T) {
	checkLeaks(t)
	s := newSRQServer(t, SRQCaps{Depth: 4})
	qp, wait := s.accept(NewCQ(4))
	peer := s.dialRaw()
	require.NoError(t, wait())
	u := uSend(rdmap.OpSend, true, 0, 0, 1, 0, pattern(10, 1))
	peer.send(u)
	require.Equal(t, wantTerminate(rdmap.SendNoBuffer, u[:ddp.UntaggedHeaderLen], len(u), nil), peer.terminate())
	<-qp.Done()
}

// With a completion handler on the server's CQ, each receive completion
// of any bound queue pair reaches the handler, which reposts its buffer
// to the SRQ from inside the handler (no library lock is held there):
// more Sends than the SRQ is deep get through, one at a time per
// connection, on two connections.
func TestSRQ_CompletionHandlerReposts(t *testing.T) {
	checkLeaks(t)
	const conns, depth, sends = 2, 2, 20
	s := newSRQServer(t, SRQCaps{Depth: depth, MaxSGE: 1})
	mr, err := s.pd.Register(make([]byte, depth*32), LocalWrite)
	require.NoError(t, err)
	var mu sync.Mutex
	got := map[uint32][]string{} // QPN → messages in arrival order
	herr := make(chan error, 1)
	cq := NewCQ(depth+4, WithCompletionHandler(func(wc *WorkCompletion) {
		if wc.Status != WCSuccess {
			return // the flush of a closing queue pair
		}
		off := int(wc.ID) * 32
		m := string(mr.Bytes()[off : off+int(wc.ByteLen)])
		if err := s.srq.PostRecv(RecvWR{ID: wc.ID, SGL: []SGE{mr.SGE(off, 32)}}); err != nil {
			select {
			case herr <- err:
			default:
			}
		}
		// Recorded after the repost: a sender that sees its message here
		// knows the buffer is back on the SRQ.
		mu.Lock()
		got[wc.QPN] = append(got[wc.QPN], m)
		mu.Unlock()
	}))
	for i := range depth {
		require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{mr.SGE(i*32, 32)}}))
	}
	servers := make([]*QP, conns)
	clients := make([]*endpoint, conns)
	for c := range conns {
		var wait func() error
		servers[c], wait = s.accept(cq)
		clients[c] = s.dialGo(QPCaps{})
		require.NoError(t, wait())
	}
	var wg sync.WaitGroup
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep := clients[c]
			src, err := ep.pd.Register(make([]byte, 32), 0)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range sends {
				n := copy(src.Bytes(), []byte{byte('a' + c), byte('0' + i%10)})
				// One Send at a time per connection, and as many
				// connections as receives: the SRQ never runs dry.
				if err := ep.qp.PostSend(SendWR{Op: OpSend, Flags: Signaled, SGL: []SGE{src.SGE(0, n)}}); err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
				var wcs [1]WorkCompletion
				_, err := ep.cq.Wait(ctx, wcs[:])
				cancel()
				if err == nil {
					err = wcs[0].Err()
				}
				if err != nil {
					t.Error(err)
					return
				}
				// The Send completed at the sender; wait until the server
				// handled it so that the next cannot overtake the repost.
				for deadline := time.Now().Add(hangLimit); ; {
					mu.Lock()
					done := len(got[servers[c].QPN()]) > i
					mu.Unlock()
					if done {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("connection %d: Send %d never completed at the server", c, i)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-herr:
		t.Fatal("reposting from the handler:", err)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	for c, q := range servers {
		msgs := got[q.QPN()]
		require.Len(t, msgs, sends, "connection %d", c)
		for i, m := range msgs {
			require.Equal(t, string([]byte{byte('a' + c), byte('0' + i%10)}), m, "connection %d message %d", c, i)
		}
	}
	require.Equal(t, depth, s.srq.Len(), "every buffer reposted")
}
