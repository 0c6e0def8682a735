package ddp

import (
	"math"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

func tagged(last bool, stag uint32, to uint64) Tagged {
	return Tagged(AppendTagged(nil, MakeControl(true, last), 0x40, stag, to))
}

func TestTaggedReceiver_MultiSegment(t *testing.T) {
	var r TaggedReceiver
	s, err := r.Receive(tagged(false, 0x2222, 0x2000), 14+1428)
	require.NoError(t, err)
	require.Equal(t, TaggedSegment{STag: 0x2222, TO: 0x2000, Len: 1428, First: true, Lookup: true}, s)
	require.True(t, r.InProgress())

	s, err = r.Receive(tagged(false, 0x2222, 0x2000+1428), 14+1428)
	require.NoError(t, err)
	require.False(t, s.First)
	require.False(t, s.Last)

	s, err = r.Receive(tagged(true, 0x2222, 0x2000+2*1428), 14+10)
	require.NoError(t, err)
	require.True(t, s.Last)
	require.True(t, s.Lookup)
	require.False(t, r.InProgress())

	// The next message may use any STag and TO.
	s, err = r.Receive(tagged(true, 0x9999, 5), 14+1)
	require.NoError(t, err)
	require.True(t, s.First)
	require.True(t, s.Last)
}

func TestTaggedReceiver_LaterSegmentChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Tagged
		want termcode.Code
	}{
		{"STag changed", tagged(true, 0x2223, 0x2000+100), termcode.DDPTaggedInvalidSTag},
		{"TO gap", tagged(true, 0x2222, 0x2000+101), termcode.DDPTaggedBaseBounds},
		{"TO behind", tagged(true, 0x2222, 0x2000), termcode.DDPTaggedBaseBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r TaggedReceiver
			_, err := r.Receive(tagged(false, 0x2222, 0x2000), 14+100)
			require.NoError(t, err)
			_, err = r.Receive(tc.h, 14+5)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, []byte(tc.h), err.(*Error).Header())
			require.Equal(t, 19, err.(*Error).SegmentLen)
			// State unchanged: the right continuation is still accepted.
			s, err := r.Receive(tagged(true, 0x2222, 0x2000+100), 14+5)
			require.NoError(t, err)
			require.True(t, s.Last)
		})
	}
}

func TestTaggedReceiver_RFC5041_7_TOWrap(t *testing.T) {
	var r TaggedReceiver
	// "A 64-bit unsigned sum of the DDP Segment payload length and the TO
	// does not wrap": TO + length = 2^64 is already a wrap.
	_, err := r.Receive(tagged(true, 7, math.MaxUint64-9), 14+9)
	require.NoError(t, err)
	_, err = r.Receive(tagged(true, 7, math.MaxUint64-9), 14+10)
	require.ErrorIs(t, err, termcode.DDPTaggedTOWrap)
	// Empty payload at the very top never wraps.
	_, err = r.Receive(tagged(false, 7, math.MaxUint64), 14)
	require.NoError(t, err)
}

func TestTaggedReceiver_RFC6581_ZeroLengthRTR(t *testing.T) {
	// siw's RTR: zero-length RDMA Write to STag 1, TO 0 (siw_qp_mpa_rts()
	// in drivers/infiniband/sw/siw/siw_qp.c).
	rtr := Tagged(testutil.Unhex(t, "c1 40 00000001 0000000000000000"))
	require.True(t, ZeroLengthMessage(rtr, 14))
	var r TaggedReceiver
	s, err := r.Receive(rtr, 14)
	require.NoError(t, err)
	require.False(t, s.Lookup)
	require.True(t, s.First && s.Last)
	require.Zero(t, s.Len)

	// irdma (STag 0) and cxgb4 (STag 1, TO 1) RTRs likewise.
	for _, h := range []Tagged{tagged(true, 0, 0), tagged(true, 1, 1)} {
		s, err := r.Receive(h, 14)
		require.NoError(t, err)
		require.False(t, s.Lookup)
	}
}

func TestTaggedReceiver_OtherSegmentsNeedLookup(t *testing.T) {
	// One payload byte.
	require.False(t, ZeroLengthMessage(tagged(true, 1, 0), 15))
	// Zero-length but not last: not a whole message.
	require.False(t, ZeroLengthMessage(tagged(false, 1, 0), 14))
	var r TaggedReceiver
	s, err := r.Receive(tagged(false, 1, 0), 14)
	require.NoError(t, err)
	require.True(t, s.Lookup)
	// A zero-length final segment of a message in progress is a
	// continuation, checked against the message and looked up.
	s, err = r.Receive(tagged(true, 1, 0), 14)
	require.NoError(t, err)
	require.True(t, s.Lookup)
	require.False(t, s.First)
}

func TestTaggedReceiver_VersionAndLength(t *testing.T) {
	var r TaggedReceiver
	bad := Tagged(AppendTagged(nil, Control(0xc0), 0x40, 1, 0))
	_, err := r.Receive(bad, 20)
	require.ErrorIs(t, err, termcode.DDPTaggedVersion)
	_, err = r.Receive(tagged(true, 1, 0), 13)
	require.ErrorIs(t, err, termcode.DDPLocalCatastrophic)
	notTagged := Tagged(AppendTagged(nil, MakeControl(false, true), 0x40, 1, 0))
	_, err = r.Receive(notTagged, 20)
	require.ErrorIs(t, err, termcode.DDPLocalCatastrophic)
	require.False(t, r.InProgress())
}
