package conn

import (
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// An invalidation never waits on the network (RFC 5040 §7.2, the region
// is invalid for every access once MR.Invalidate returns): a peer that
// sends an RDMA Read, Atomic or Flush Request on a connection without CRC
// and withholds the last octets of its FPDU (the CRC field, read after
// the request's checks) holds the region's reference in the receiver. The
// invalidation cuts that read and the stream ends with the request's
// invalid-STag Terminate.
func TestHostile_InvalidateCutsAWithheldRequest_RFC5040_7_2(t *testing.T) {
	cases := []struct {
		name string
		mr   func(s *hostileServer) *MR
		req  func(mr *MR) []byte
		want rdmap.Condition
	}{
		{"ReadRequest", func(s *hostileServer) *MR { return s.rw }, func(mr *MR) []byte {
			src := mr.Remote(0)
			return uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 1, Size: 16, SrcSTag: uint32(src.STag), SrcTO: src.TO})
		}, rdmap.ReadReqSourceInvalidSTag},
		{"AtomicRequest", (*hostileServer).atomicTarget, func(mr *MR) []byte {
			return uAtomic(1, rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: uint32(mr.STag()), TO: mr.Remote(0).TO, Args: rdmap.AtomicArgs{AddSwap: 1}})
		}, rdmap.AtomicTargetInvalidSTag},
		{"FlushRequest", func(s *hostileServer) *MR { return s.rw }, func(mr *MR) []byte {
			return rdmap.AppendFlushRequest(nil, 1, rdmap.FlushRequestFields{ID: 1, STag: uint32(mr.STag()), TO: mr.Remote(0).TO, Length: 16, Placement: rdmap.PlaceVisibility})
		}, rdmap.ReadReqSourceInvalidSTag},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t, WithCRC(CRCOff))
			p := s.dialWith(mpa.Config{IRD: 1, ORD: 1, CRC: mpa.CRCOff}, appendPeerTrailer(nil))
			require.False(t, p.res.CRC)
			mr := tc.mr(s)
			f := p.frame(tc.req(mr))
			p.sendRaw(f[:len(f)-4]) // all but the CRC field
			for deadline := time.Now().Add(hangLimit); mr.r.RemoteUses() == 0; time.Sleep(time.Millisecond) {
				require.True(t, time.Now().Before(deadline), "the request never took the region")
			}
			returnsWithin(t, hangLimit, "Invalidate", func() { require.NoError(t, mr.Invalidate()) })
			require.Zero(t, mr.r.RemoteUses())
			u := p.terminate()
			rt, err := rdmap.ParseTerminate(u)
			require.NoError(t, err)
			require.Equal(t, tc.want.Code(), rt.Code(), "%v", rt.Chosen())
			<-s.qp.Done()
			var te *rdmap.TerminateError
			require.ErrorAs(t, s.qp.Err(), &te)
			require.Equal(t, tc.want.Code(), te.Code)
		})
	}
}

// A Send that a shared receive queue's consumer rejects before any
// buffer matters (a wrong MSN, RFC 5041 §7.2) takes no receive from the
// SRQ: the other queue pairs keep it, and the rejected stream completes
// nothing.
func TestSRQ_RejectedSendTakesNoReceive_RFC5041_7_2(t *testing.T) {
	s := newSRQServer(t, SRQCaps{Depth: 4})
	mr, err := s.pd.Register(make([]byte, 4*256), LocalWrite)
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, s.srq.PostRecv(RecvWR{ID: uint64(100 + i), SGL: []SGE{mr.SGE(i*256, 256)}}))
	}
	cq := NewCQ(8)
	qp, wait := s.accept(cq)
	peer := s.dialRaw()
	require.NoError(t, wait())
	peer.send(uSend(rdmap.OpSend, true, 0, 0, 7, 0, pattern(10, 1))) // MSN 7, not 1
	u := peer.terminate()
	rt, err := rdmap.ParseTerminate(u)
	require.NoError(t, err)
	require.Equal(t, termcode.DDPUntaggedMSNRange, rt.Code(), "%v", rt.Chosen())
	<-qp.Done()
	<-qp.finished
	require.Equal(t, 4, s.srq.Len(), "the rejected Send left every receive on the SRQ")
	var wcs [4]WorkCompletion
	require.Zero(t, cq.Poll(wcs[:]), "nothing completes for a message that never began")
}
