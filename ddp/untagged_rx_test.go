package ddp

import (
	"math"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/stretchr/testify/require"
)

func untagged(last bool, qn, msn, mo uint32) Untagged {
	return Untagged(AppendUntagged(nil, MakeControl(false, last), 0x43, 0, qn, msn, mo))
}

func TestUntaggedQueue_RFC5041_4_FirstMSNIsOne(t *testing.T) {
	q := NewUntaggedQueue()
	require.Equal(t, uint32(1), q.NextMSN())
	_, err := q.Receive(untagged(true, 0, 0, 0), 18+16, 16)
	require.ErrorIs(t, err, termcode.DDPUntaggedMSNRange)
	s, err := q.Receive(untagged(true, 0, 1, 0), 18+16, 16)
	require.NoError(t, err)
	require.Equal(t, UntaggedSegment{QN: 0, MSN: 1, Len: 16, First: true, Last: true, MsgLen: 16}, s)
	require.Equal(t, uint32(2), q.NextMSN())
}

func TestUntaggedQueue_Reassembly(t *testing.T) {
	q := NewUntaggedQueue()
	s, err := q.Receive(untagged(false, 0, 1, 0), 18+1424, 4096)
	require.NoError(t, err)
	require.True(t, s.First)
	require.False(t, s.Last)
	require.True(t, q.InProgress())

	// Continuations ignore bufLen (the message keeps its buffer), even NoBuffer.
	s, err = q.Receive(untagged(false, 0, 1, 1424), 18+1424, NoBuffer)
	require.NoError(t, err)
	require.False(t, s.First)
	require.Equal(t, uint32(1424), s.MO)

	s, err = q.Receive(untagged(true, 0, 1, 2848), 18+1248, NoBuffer)
	require.NoError(t, err)
	require.True(t, s.Last)
	require.Equal(t, 4096, s.MsgLen)
	require.False(t, q.InProgress())
	require.Equal(t, uint32(2), q.NextMSN())
}

func TestUntaggedQueue_RFC5041_7_Errors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(q *UntaggedQueue)
		h      Untagged
		segLen int
		bufLen int
		want   termcode.Code
	}{
		{"MSN skipped", nil, untagged(true, 0, 2, 0), 18, 10, termcode.DDPUntaggedMSNRange},
		{"MSN replayed", func(q *UntaggedQueue) { q.SetNextMSN(5) }, untagged(true, 0, 4, 0), 18, 10, termcode.DDPUntaggedMSNRange},
		{"new message MO not 0", nil, untagged(true, 0, 1, 4), 18 + 4, 10, termcode.DDPUntaggedInvalidMO},
		{"no buffer", nil, untagged(true, 0, 1, 0), 18 + 4, NoBuffer, termcode.DDPUntaggedNoBuffer},
		{"zero-length Send and no buffer", nil, untagged(true, 0, 1, 0), 18, NoBuffer, termcode.DDPUntaggedNoBuffer},
		{"longer than buffer", nil, untagged(true, 0, 1, 0), 18 + 17, 16, termcode.DDPUntaggedTooLong},
		{"continuation MSN differs", func(q *UntaggedQueue) {
			_, err := q.Receive(untagged(false, 0, 1, 0), 18+8, 64)
			require.NoError(t, err)
		}, untagged(true, 0, 2, 8), 18 + 8, 64, termcode.DDPUntaggedMSNRange},
		{"continuation MO gap", func(q *UntaggedQueue) {
			_, err := q.Receive(untagged(false, 0, 1, 0), 18+8, 64)
			require.NoError(t, err)
		}, untagged(true, 0, 1, 9), 18 + 8, 64, termcode.DDPUntaggedInvalidMO},
		{"continuation overflows first buffer", func(q *UntaggedQueue) {
			_, err := q.Receive(untagged(false, 0, 1, 0), 18+8, 10)
			require.NoError(t, err)
		}, untagged(true, 0, 1, 8), 18 + 8, 1 << 20, termcode.DDPUntaggedTooLong},
		{"version", nil, Untagged(AppendUntagged(nil, Control(0x42), 0x43, 0, 0, 1, 0)), 18, 10, termcode.DDPUntaggedVersion},
		{"segment shorter than header", nil, untagged(true, 0, 1, 0), 17, 10, termcode.DDPLocalCatastrophic},
		{"T flag set", nil, Untagged(AppendUntagged(nil, MakeControl(true, true), 0x43, 0, 0, 1, 0)), 18, 10, termcode.DDPLocalCatastrophic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewUntaggedQueue()
			if tc.setup != nil {
				tc.setup(&q)
			}
			before := q
			_, err := q.Receive(tc.h, tc.segLen, tc.bufLen)
			require.ErrorIs(t, err, tc.want)
			var e *Error
			require.ErrorAs(t, err, &e)
			// The copy is as long as the header's own T flag says, and
			// no longer than the segment.
			require.Equal(t, []byte(tc.h[:min(HeaderLen(tc.h.Control()), tc.segLen)]), e.Header())
			require.Equal(t, tc.segLen, e.SegmentLen)
			require.Equal(t, before, q, "state must not change on error")
		})
	}
}

func TestUntaggedQueue_ExactFit(t *testing.T) {
	q := NewUntaggedQueue()
	_, err := q.Receive(untagged(true, 0, 1, 0), 18+16, 16)
	require.NoError(t, err)
	s, err := q.Receive(untagged(true, 0, 2, 0), 18, 0) // zero-length into an empty buffer
	require.NoError(t, err)
	require.Equal(t, 0, s.MsgLen)
}

func TestUntaggedQueue_MSNWraps(t *testing.T) {
	q := NewUntaggedQueue()
	q.SetNextMSN(math.MaxUint32)
	_, err := q.Receive(untagged(true, 0, math.MaxUint32, 0), 18, 0)
	require.NoError(t, err)
	require.Equal(t, uint32(0), q.NextMSN())
	_, err = q.Receive(untagged(true, 0, 0, 0), 18, 0)
	require.NoError(t, err)
	require.Equal(t, uint32(1), q.NextMSN())
}

func TestUntaggedQueue_MOCannotPass32Bits(t *testing.T) {
	q := NewUntaggedQueue()
	q.SetNextMSN(3)
	// Pretend 2^32-10 bytes already arrived into a huge buffer.
	q.active, q.received, q.bufLen = true, math.MaxUint32-10, math.MaxUint64
	_, err := q.Receive(untagged(false, 0, 3, math.MaxUint32-10), 18+20, NoBuffer)
	require.ErrorIs(t, err, termcode.DDPUntaggedTooLong)
	s, err := q.Receive(untagged(true, 0, 3, math.MaxUint32-10), 18+20, NoBuffer)
	require.NoError(t, err)
	require.True(t, s.Last)
}

func TestUntaggedQueues_RFC5041_7_InvalidQN(t *testing.T) {
	qs := NewUntaggedQueues(3)
	require.Equal(t, 3, qs.Len())
	require.Nil(t, qs.Queue(3))
	require.Nil(t, qs.Queue(math.MaxUint32))
	for _, qn := range []uint32{3, 4, 0x80000000, math.MaxUint32} {
		_, err := qs.Receive(untagged(true, qn, 1, 0), 18, 10)
		require.ErrorIs(t, err, termcode.DDPUntaggedInvalidQN, qn)
	}
	// Each queue has its own MSN sequence.
	for qn := uint32(0); qn < 3; qn++ {
		s, err := qs.Receive(untagged(true, qn, 1, 0), 18+4, 4)
		require.NoError(t, err)
		require.Equal(t, qn, s.QN)
	}
	_, err := qs.Receive(untagged(true, 1, 2, 0), 18, 4)
	require.NoError(t, err)
	require.Equal(t, uint32(2), qs.Queue(0).NextMSN())
	require.Equal(t, uint32(3), qs.Queue(1).NextMSN())

	bad := Untagged(AppendUntagged(nil, Control(0x43), 0x43, 0, 9, 1, 0))
	_, err = qs.Receive(bad, 18, 4)
	require.ErrorIs(t, err, termcode.DDPUntaggedVersion, "version is checked before the QN")
}
