package conn

import (
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/stretchr/testify/require"
)

func allHostileCases() []hostileCase { return append(hostileCases(), rfc7306Cases()...) }

// uAtomic is an Atomic Request ULPDU (QN 1) with the given MSN.
func uAtomic(msn uint32, f rdmap.AtomicRequestFields) []byte {
	return rdmap.AppendAtomicRequest(nil, msn, f)
}

// atomicTarget registers a 64-byte region open to remote atomics.
func (s *hostileServer) atomicTarget() *MR {
	s.t.Helper()
	mr, err := s.pd.Register(make([]byte, 64), LocalWrite|RemoteAtomic)
	require.NoError(s.t, err)
	return mr
}

// rfc7306Cases are the hostile cases of RFC 7306 messages on a connection
// that negotiated them (docs/rfc-notes/rfc7306.md): each ends with the
// exact Terminate of its row in terminate.md.
func rfc7306Cases() []hostileCase {
	fa := func(stag uint32, to uint64) rdmap.AtomicRequestFields {
		return rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: stag, TO: to, Args: rdmap.AtomicArgs{AddSwap: 1}}
	}
	return []hostileCase{
		{name: "AtomicMalformed/payload", cond: rdmap.AtomicMalformed, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.atomicTarget()
			u := append(uAtomic(1, fa(uint32(mr.STag()), mr.Remote(0).TO)), 0, 0, 0, 0)
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "AtomicMalformed/subcode", cond: rdmap.AtomicMalformed, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.atomicTarget()
			f := fa(uint32(mr.STag()), mr.Remote(0).TO)
			f.Op = 1 // reserved (IANA)
			h, n := offending(s, p, uAtomic(1, f))
			return h, n, nil
		}},
		{name: "AtomicMisaligned", cond: rdmap.AtomicMisaligned, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.atomicTarget()
			h, n := offending(s, p, uAtomic(1, fa(uint32(mr.STag()), mr.Remote(4).TO)))
			return h, n, nil
		}},
		{name: "AtomicIRDExceeded", cond: rdmap.AtomicIRDExceeded, ext: true, opts: []Option{WithIRDORD(1, 1)}, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// A Read whose response cannot leave while the peer does not
			// read holds the one IRD credit the Atomic Request needs too.
			big, err := s.pd.Register(make([]byte, 64<<20), RemoteRead)
			require.NoError(s.t, err)
			p.send(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 0x1234, Size: 64 << 20, SrcSTag: uint32(big.STag()), SrcTO: big.Remote(0).TO}))
			time.Sleep(50 * time.Millisecond)
			mr := s.atomicTarget()
			h, n := offending(s, p, uAtomic(2, fa(uint32(mr.STag()), mr.Remote(0).TO)))
			return h, n, nil
		}},
		{name: "AtomicRespUnexpected", cond: rdmap.AtomicRespUnexpected, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, rdmap.AppendAtomicResponse(nil, 1, 1, 42))
			return h, n, nil
		}},
		{name: "AtomicTargetInvalidSTag", cond: rdmap.AtomicTargetInvalidSTag, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uAtomic(1, fa(0xdead00, 0)))
			return h, n, nil
		}},
		{name: "AtomicTargetBaseBounds", cond: rdmap.AtomicTargetBaseBounds, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.atomicTarget()
			h, n := offending(s, p, uAtomic(1, fa(uint32(mr.STag()), mr.Remote(64).TO)))
			return h, n, nil
		}},
		{name: "AtomicTargetAccessRights", cond: rdmap.AtomicTargetAccessRights, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			// rw may be written and read by the peer, but not targeted by
			// atomics: the arena check proves the word unchanged.
			h, n := offending(s, p, uAtomic(1, fa(uint32(s.rw.STag()), s.rw.Remote(0).TO)))
			return h, n, nil
		}},
		{name: "AtomicTargetNotAssociated", cond: rdmap.AtomicTargetNotAssociated, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, uAtomic(1, fa(uint32(s.other.STag()), s.other.Remote(0).TO)))
			return h, n, nil
		}},
		{name: "AtomicTargetTOWrap", cond: rdmap.AtomicTargetTOWrap, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.atomicTarget()
			h, n := offending(s, p, uAtomic(1, fa(uint32(mr.STag()), ^uint64(0)-7)))
			return h, n, nil
		}},
	}
}

// Toward a connection that did not negotiate RFC 7306 (a peer without the
// iwarp-go trailer), each of its opcodes is answered exactly as siw
// answers any opcode above 7: Terminate 0/2/0x06 with the DDP header.
func TestHostile_RFC7306NotNegotiated_UnexpectedOpcode(t *testing.T) {
	for _, u := range [][]byte{
		rdmap.AppendImmediate(nil, rdmap.OpImmediate, 1, 7),
		rdmap.AppendImmediate(nil, rdmap.OpImmediateSE, 1, 7),
		uAtomic(1, rdmap.AtomicRequestFields{Op: rdmap.AtomicCmpSwap, ID: 1, STag: 1, TO: 8}),
		rdmap.AppendAtomicResponse(nil, 1, 1, 1),
	} {
		t.Run(rdmap.ControlOpcode(u[1]).String(), func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t)
			s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, 64)}})
			p := s.dial(mpa.Config{IRD: 1, ORD: 1})
			h, n := offending(s, p, u)
			require.Equal(t, wantTerminate(rdmap.UnexpectedOpcode, h, n, nil), p.terminate())
			<-s.qp.Done()
			require.False(t, s.qp.PeerAtomics())
			s.checkArena()
		})
	}
}

// An Immediate Data message with no receive posted is a Send with no
// buffer (RFC 5040 §5.3, 1/2/0x02), and one that consumed a receive
// completes it with the value.
func TestHostile_ImmediateNeedsReceive_RFC7306(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dialWith(mpa.Config{IRD: 1, ORD: 1}, appendPeerTrailer(nil))
	require.NoError(t, s.qp.PostRecv(RecvWR{ID: 3, SGL: []SGE{s.recv.SGE(0, 64)}}))
	p.send(rdmap.AppendImmediate(nil, rdmap.OpImmediateSE, 1, 0xfeed))
	wc := s.wait(t)
	require.NoError(t, wc.Err())
	require.Equal(t, uint64(3), wc.ID)
	require.Equal(t, WCWithImm|WCSolicited, wc.Flags)
	require.Equal(t, uint64(0xfeed), wc.Imm)
	require.Zero(t, wc.ByteLen)
	u := rdmap.AppendImmediate(nil, rdmap.OpImmediate, 2, 1)
	p.send(u)
	require.Equal(t, wantTerminate(rdmap.SendNoBuffer, u[:ddp.UntaggedHeaderLen], len(u), nil), p.terminate())
	s.checkArena()
}

// An Atomic Response whose Original Request Identifier is not that of the
// oldest outstanding request of queue 1 is an invalid response (RFC 7306
// §5.2.2 item 7): the requester ends the stream with AtomicMalformed and
// the atomic completes in error.
func TestHostile_AtomicResponseWrongID_RFC7306_5_2_2(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dialWith(mpa.Config{IRD: 1, ORD: 1}, appendPeerTrailer(nil))
	res, err := s.pd.Register(make([]byte, 8), LocalWrite)
	require.NoError(t, err)
	require.NoError(t, s.qp.PostSend(SendWR{ID: 4, Op: OpFetchAdd, Flags: Signaled, SGL: []SGE{res.SGE(0, 8)}, Remote: RemoteAddr{STag: 0x4242, TO: 0x1000}, Atomic: FetchAdd(1)}))
	p.send(uTagged(rdmap.OpWrite, true, 1, 0, nil)) // the responder may now transmit
	u := p.next()
	h, err := rdmap.ParseWith(u, len(u), rdmap.ExtRFC7306)
	require.NoError(t, err)
	require.Equal(t, rdmap.OpAtomicRequest, h.Op)
	ar := h.AtomicRequest().Fields()
	require.Equal(t, rdmap.AtomicFetchAdd, ar.Op)
	require.Equal(t, ^uint64(0), ar.Args.CompareMask, "RFC 7306 §5.1.1: all ones on transmit")
	resp := rdmap.AppendAtomicResponse(nil, 1, ar.ID+1, 5)
	p.send(resp)
	require.Equal(t, wantTerminate(rdmap.AtomicMalformed, resp[:ddp.UntaggedHeaderLen], len(resp), nil), p.terminate())
	wc := s.wait(t)
	require.Equal(t, uint64(4), wc.ID)
	require.NotEqual(t, WCSuccess, wc.Status)
	require.Zero(t, res.LoadUint64(0), "nothing placed from the bad response")
}

// An Atomic Request whose queue pair has left the connected states by the
// time it would be carried out changes nothing (RFC 7306 §5.2.1: the
// responder executes an atomic it will answer; one that fails cannot):
// the failure of the connection is ordered before it, and the region's
// remote reference is given back. The first request shows the same word
// changed while the queue pair is up.
func TestHostile_AtomicAfterFailure_RFC7306_5_2_1(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dialWith(mpa.Config{IRD: 1, ORD: 1}, appendPeerTrailer(nil))
	mr := s.atomicTarget()
	f := rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: uint32(mr.STag()), TO: mr.Remote(0).TO, Args: rdmap.AtomicArgs{AddSwap: 5}}
	p.send(uAtomic(1, f))
	u := p.next()
	h, err := rdmap.ParseWith(u, len(u), rdmap.ExtRFC7306)
	require.NoError(t, err)
	require.Equal(t, rdmap.OpAtomicResponse, h.Op)
	require.Equal(t, uint64(5), mr.LoadUint64(0))

	s.qp.mu.Lock()
	e := s.qp.eng
	s.qp.mu.Unlock()
	p.c.Close() // the peer goes: the queue pair fails
	<-s.qp.finished
	require.GreaterOrEqual(t, s.qp.state, stateError)

	// The second request reached the commit, verified, as the connection
	// failed: rxAtomicRequest's work is done, the commit is left.
	f.ID = 2
	r, word, lf := s.pd.pd.LookupRemoteFrom(mr.STag(), f.TO, 8, stag.RemoteAtomic, s.qp)
	require.Equal(t, stag.OK, lf)
	e.rxMu.Lock()
	e.rx.pend = rxPending{action: rxQueueAtomic, irq: irqEntry{kind: reqAtomic, region: r, src: word, reqID: f.ID}, atomic: f}
	e.placing.Store(r)
	err = e.commitQueueAtomic(nil, 0)
	e.rxMu.Unlock()
	require.NoError(t, err)
	require.Equal(t, uint64(5), mr.LoadUint64(0), "an atomic of a failed queue pair changed the target word")
	require.Zero(t, r.RemoteUses(), "the region's remote reference is kept")
	require.Nil(t, e.placing.Load())
	s.qp.mu.Lock()
	require.True(t, e.irq.empty(), "a failed queue pair queued a response")
	s.qp.mu.Unlock()
}
