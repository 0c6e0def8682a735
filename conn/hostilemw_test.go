package conn

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/stretchr/testify/require"
)

// Memory windows in the hostile suite: every access through a window that
// its binding does not allow ends the stream with the Terminate of the
// plain region check it fails (docs/rfc-notes/rfc5040.md, "Memory
// windows"), and the arena proves no byte outside what valid segments
// addressed changed.

// winOff and winLen place the windows of these cases inside rw.
const (
	winOff = 1024
	winLen = 256
)

// bindable registers rw's bytes a second time with MWBind, so that the
// windows of a case lie inside the arena.
func (s *hostileServer) bindable(extra Access) *MR {
	s.t.Helper()
	mr, err := s.pd.Register(s.rw.Bytes(), LocalWrite|RemoteWrite|RemoteRead|MWBind|extra)
	require.NoError(s.t, err)
	return mr
}

// window1 binds a type 1 window over [winOff, winOff+winLen) of rw.
func (s *hostileServer) window1(a Access, zero bool) *MW {
	s.t.Helper()
	mw, err := s.pd.AllocMW(MWType1)
	require.NoError(s.t, err)
	_, err = mw.Bind(BindInfo{MR: s.bindable(0), Offset: winOff, Length: winLen, Access: a, ZeroBased: zero})
	require.NoError(s.t, err)
	return mw
}

// window2 binds a type 2 window over the same range through qp (the
// server's own QP with OpBindMW, or another one of the PD).
func (s *hostileServer) window2(p *rawPeer, qp *QP, a Access) *MW {
	s.t.Helper()
	mw, err := s.pd.AllocMW(MWType2)
	require.NoError(s.t, err)
	info := BindInfo{MR: s.bindable(0), Offset: winOff, Length: winLen, Access: a, Key: mw.STag().Key() + 1}
	if qp == s.qp {
		s.postBind(p, mw, info)
		return mw
	}
	spec, err := mw.spec(info, qp)
	require.NoError(s.t, err)
	_, _, err = mw.w.Bind(spec)
	require.NoError(s.t, err)
	return mw
}

// postBind binds a type 2 window with OpBindMW on the server's QP and
// waits for its completion; the raw peer's zero-length Write lets the
// responder's send queue start (RFC 5044 §7.1.2).
func (s *hostileServer) postBind(p *rawPeer, mw *MW, info BindInfo) {
	s.t.Helper()
	require.NoError(s.t, s.qp.PostSend(SendWR{ID: 77, Op: OpBindMW, Flags: Signaled, MW: mw, Bind: info}))
	p.send(uTagged(rdmap.OpWrite, true, 1, 0, nil))
	wc := s.wait(s.t)
	require.NoError(s.t, wc.Err())
	require.Equal(s.t, WCBindMW, wc.Op)
	require.Equal(s.t, uint64(77), wc.ID)
	require.True(s.t, mw.Bound())
}

// otherQP is a second queue pair of the server's PD.
func (s *hostileServer) otherQP() *QP {
	s.t.Helper()
	qp, err := s.pd.NewQP(s.cq, QPCaps{})
	require.NoError(s.t, err)
	s.t.Cleanup(func() { qp.Close() })
	return qp
}

func mwCases() []hostileCase {
	payload := bytes.Repeat([]byte{0x5A}, 64)
	write := func(mw *MW, off int, b []byte) []byte {
		r := mw.Remote(off)
		return uTagged(rdmap.OpWrite, true, uint32(r.STag), r.TO, b)
	}
	read := func(mw *MW, off int, n uint32) (u, rr []byte) {
		r := mw.Remote(off)
		f := rdmap.ReadRequestFields{SinkSTag: 0x77, SinkTO: 0, Size: n, SrcSTag: uint32(r.STag), SrcTO: r.TO}
		return uReadReq(1, 0, f), rrBody(f)
	}
	readCase := func(name string, c rdmap.Condition, mk func(s *hostileServer, p *rawPeer) *MW, off int, n uint32) hostileCase {
		return hostileCase{name: name, cond: c, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			u, rr := read(mk(s, p), off, n)
			h, segLen := offending(s, p, u)
			return h, segLen, rr
		}}
	}
	sendInv := func(s *hostileServer, p *rawPeer, st STag) ([]byte, int) {
		s.qp.PostRecv(RecvWR{SGL: []SGE{s.recv.SGE(0, regionLen)}})
		// The Send's payload is placed; the invalidation is refused when
		// the message completes (RFC 5040 §5.3).
		s.placed(s.recv, 0, payload)
		return offending(s, p, uSend(rdmap.OpSendInvalidate, true, uint32(st), 0, 1, 0, payload))
	}
	return []hostileCase{
		// RFC 5041 §7.1 / RFC 5040 §7.2: the window's bounds, not the
		// region's.
		{name: "MW/WriteBaseBounds/past-end", cond: rdmap.WriteBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, write(s.window1(RemoteWrite, false), winLen-8, payload))
			return h, n, nil
		}},
		{name: "MW/WriteBaseBounds/before-start", cond: rdmap.WriteBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window1(RemoteWrite, false)
			r := mw.Remote(0)
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(r.STag), r.TO-8, payload))
			return h, n, nil
		}},
		{name: "MW/WriteBaseBounds/zero-based", cond: rdmap.WriteBaseBounds, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window1(RemoteWrite, true)
			require.Equal(s.t, uint64(0), mw.Remote(0).TO)
			h, n := offending(s, p, write(mw, winLen, payload[:1]))
			return h, n, nil
		}},
		{name: "MW/WriteAccessRights", cond: rdmap.WriteAccessRights, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, write(s.window1(RemoteRead, false), 0, payload))
			return h, n, nil
		}},
		{name: "MW/WriteInvalidSTag/invalidated", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window1(RemoteWrite, false)
			u := write(mw, 0, payload)
			require.NoError(s.t, mw.Invalidate())
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "MW/WriteInvalidSTag/rebound", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window1(RemoteWrite, false)
			u := write(mw, 0, payload)
			_, err := mw.Bind(BindInfo{MR: s.bindable(0), Offset: winOff, Length: winLen, Access: RemoteWrite})
			require.NoError(s.t, err)
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		{name: "MW/WriteInvalidSTag/unbound", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw, err := s.pd.AllocMW(MWType2)
			require.NoError(s.t, err)
			h, n := offending(s, p, uTagged(rdmap.OpWrite, true, uint32(mw.STag()), 0, payload))
			return h, n, nil
		}},
		// A type 2 window is tied to the queue pair that bound it
		// (RFC 5040 §8.1.1 item 2): "STag not associated".
		{name: "MW/WriteSTagNotAssociated/other-QP", cond: rdmap.WriteSTagNotAssociated, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			h, n := offending(s, p, write(s.window2(p, s.otherQP(), RemoteWrite), 0, payload))
			return h, n, nil
		}},
		{name: "MW/WriteInvalidSTag/remote-invalidated", cond: rdmap.WriteInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window2(p, s.qp, RemoteWrite)
			u := write(mw, 0, payload)
			// Valid: a Write through the window, then a Send with
			// Invalidate naming it (RFC 5040 §5.3).
			p.send(write(mw, 8, payload))
			s.placed(s.rw, winOff+8, payload)
			require.NoError(s.t, s.qp.PostRecv(RecvWR{ID: 5, SGL: []SGE{s.recv.SGE(0, 64)}}))
			p.send(uSend(rdmap.OpSendInvalidate, true, uint32(mw.STag()), 0, 1, 0, payload[:4]))
			s.placed(s.recv, 0, payload[:4])
			wc := s.wait(s.t)
			require.NoError(s.t, wc.Err())
			require.Equal(s.t, WCWithInv, wc.Flags)
			require.Equal(s.t, uint32(mw.STag()), wc.InvSTag)
			require.False(s.t, mw.Bound())
			h, n := offending(s, p, u)
			return h, n, nil
		}},
		readCase("MW/ReadReqSourceBaseBounds", rdmap.ReadReqSourceBaseBounds, func(s *hostileServer, _ *rawPeer) *MW { return s.window1(RemoteRead, false) }, 1, winLen),
		readCase("MW/ReadReqSourceAccessRights", rdmap.ReadReqSourceAccessRights, func(s *hostileServer, _ *rawPeer) *MW { return s.window1(RemoteWrite, false) }, 0, 8),
		readCase("MW/ReadReqSourceNotAssociated/other-QP", rdmap.ReadReqSourceNotAssociated, func(s *hostileServer, p *rawPeer) *MW { return s.window2(p, s.otherQP(), RemoteRead) }, 0, 8),
		{name: "MW/ReadReqSourceInvalidSTag/local-inv", cond: rdmap.ReadReqSourceInvalidSTag, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window2(p, s.qp, RemoteRead)
			require.NoError(s.t, s.qp.PostSend(SendWR{ID: 78, Op: OpLocalInv, Flags: Signaled, InvSTag: mw.STag()}))
			wc := s.wait(s.t)
			require.NoError(s.t, wc.Err())
			require.Equal(s.t, WCLocalInv, wc.Op)
			require.False(s.t, mw.Bound())
			u, rr := read(mw, 0, 8)
			h, n := offending(s, p, u)
			return h, n, rr
		}},
		// Send with Invalidate: peers invalidate type 2 windows of their
		// own queue pair only; type 1 windows and regions with windows
		// bound cannot be invalidated.
		{name: "MW/SendInvCannotInvalidate/type-1", cond: rdmap.SendInvCannotInvalidate, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window1(RemoteWrite, false)
			h, n := sendInv(s, p, mw.STag())
			require.True(s.t, mw.Bound())
			return h, n, nil
		}},
		{name: "MW/SendInvCannotInvalidate/region-with-windows", cond: rdmap.SendInvCannotInvalidate, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mr := s.bindable(0)
			mw, err := s.pd.AllocMW(MWType1)
			require.NoError(s.t, err)
			_, err = mw.Bind(BindInfo{MR: mr, Length: 8, Access: RemoteRead})
			require.NoError(s.t, err)
			h, n := sendInv(s, p, mr.STag())
			require.Equal(s.t, stag.StateValid, mr.r.State())
			return h, n, nil
		}},
		{name: "MW/SendInvProtection/other-QP", cond: rdmap.SendInvProtection, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw := s.window2(p, s.otherQP(), RemoteWrite)
			h, n := sendInv(s, p, mw.STag())
			require.True(s.t, mw.Bound())
			return h, n, nil
		}},
		{name: "MW/AtomicTargetNotAssociated/other-QP", cond: rdmap.AtomicTargetNotAssociated, ext: true, run: func(s *hostileServer, p *rawPeer) ([]byte, int, []byte) {
			mw, err := s.pd.AllocMW(MWType2)
			require.NoError(s.t, err)
			spec, err := mw.spec(BindInfo{MR: s.bindable(RemoteAtomic), Offset: winOff, Length: winLen, Access: RemoteAtomic, Key: 1 + mw.STag().Key()}, s.otherQP())
			require.NoError(s.t, err)
			_, _, err = mw.w.Bind(spec)
			require.NoError(s.t, err)
			r := mw.Remote(0)
			h, n := offending(s, p, uAtomic(1, rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: uint32(r.STag), TO: r.TO, Args: rdmap.AtomicArgs{AddSwap: 1}}))
			return h, n, nil
		}},
	}
}

// TestHostile_MemoryWindows runs mwCases as TestHostile_TerminateTable runs
// its table: exact Terminate, the stream ends, the local error, the arena.
func TestHostile_MemoryWindows(t *testing.T) {
	for _, hc := range mwCases() {
		t.Run(hc.name, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t, hc.opts...)
			var trailer []byte
			if hc.ext {
				trailer = appendPeerTrailer(nil)
			}
			p := s.dialWith(mpa.Config{IRD: 1, ORD: 1}, trailer)
			hdr, segLen, rr := hc.run(s, p)
			require.Equal(t, wantTerminate(hc.cond, hdr, segLen, rr), p.terminate(), "Terminate ULPDU for %v", hc.cond)
			p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := p.r.Next()
			require.Error(t, err)
			<-s.qp.Done()
			var te *rdmap.TerminateError
			require.True(t, errors.As(s.qp.Err(), &te), "QP error %v", s.qp.Err())
			require.Equal(t, hc.cond.Code(), te.Code)
			s.checkArena()
		})
	}
}

// After MW.Invalidate returns, no peer writes a byte through the window: a
// Write whose payload stalled half way is cut and the rest never lands.
func TestHostile_WindowWriteAfterInvalidate(t *testing.T) {
	checkLeaks(t)
	// Without CRC the placement is cut-through, so it is under way when
	// Invalidate runs (TestHostile_RemoteWriteAfterRevoke has both modes).
	s := newHostileServer(t, WithCRC(mpa.CRCOff))
	p := s.dial(mpa.Config{IRD: 1, ORD: 1, CRC: mpa.CRCOff})
	mw, err := s.pd.AllocMW(MWType1)
	require.NoError(t, err)
	_, err = mw.Bind(BindInfo{MR: s.bindable(0), Offset: 64, Length: 3500, Access: RemoteWrite})
	require.NoError(t, err)
	payload := bytes.Repeat([]byte{0x77}, 3000)
	r := mw.Remote(0)
	u := uTagged(rdmap.OpWrite, true, uint32(r.STag), r.TO, payload)
	f := p.frame(u)
	p.sendRaw(f[:1000])
	b := mw.w.Binding()
	eventually(t, "the placement to begin", func() bool { return b.RemoteUses() > 0 })
	returnsWithin(t, hangLimit, "Invalidate", func() { require.NoError(t, mw.Invalidate()) })
	require.Zero(t, b.RemoteUses())
	snapshot := append([]byte(nil), s.arena...)
	p.c.SetWriteDeadline(time.Now().Add(time.Second))
	p.c.Write(f[1000:])
	require.Equal(t, wantTerminate(rdmap.WriteInvalidSTag, u[:ddp.TaggedHeaderLen], len(u), nil), p.terminate())
	<-s.qp.finished
	require.Equal(t, snapshot, s.arena, "bytes landed after Invalidate returned")
	require.True(t, errors.Is(s.qp.Err(), net.ErrClosed), "the revoked placement's read was cut: %v", s.qp.Err())
}

// Deregistering a region with windows bound fails (verbs' EBUSY), and so
// does invalidating it; once the windows are gone both work.
func TestWindow_RegionBusy(t *testing.T) {
	pd := NewPD()
	mr, err := pd.Register(make([]byte, 64), LocalWrite|RemoteWrite|MWBind)
	require.NoError(t, err)
	mw, err := pd.AllocMW(MWType1)
	require.NoError(t, err)
	_, err = mw.Bind(BindInfo{MR: mr, Length: 64, Access: RemoteWrite})
	require.NoError(t, err)
	err = mr.Deregister()
	require.ErrorIs(t, err, ErrMRBusy)
	require.ErrorIs(t, err, ErrWindowsBound)
	require.ErrorIs(t, mr.Invalidate(), ErrWindowsBound)
	require.NoError(t, mw.Free())
	require.Error(t, mw.Free())
	require.NoError(t, mr.Deregister())
}
