package ddp

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// collect runs s to the end and returns copies of the segments' headers and
// the payload slices as produced.
func collect(t *testing.T, s *Segmenter) (hdrs [][]byte, payloads [][][]byte, lasts []bool) {
	t.Helper()
	for i := 0; ; i++ {
		require.Less(t, i, 1<<20, "segmenter does not terminate")
		seg, ok := s.Next(nil, nil)
		if !ok {
			return
		}
		sum := 0
		for _, p := range seg.Payload {
			require.NotEmpty(t, p, "no empty payload slices")
			sum += len(p)
		}
		require.Equal(t, seg.Len, sum)
		hdrs = append(hdrs, seg.Header)
		payloads = append(payloads, seg.Payload)
		lasts = append(lasts, seg.Last)
	}
}

func join(pp [][]byte) []byte { return bytes.Join(pp, nil) }

func message(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

func TestSegmenter_RFC5041_5_Tagged(t *testing.T) {
	msg := message(4000)
	var s Segmenter
	// MULPDU 1442: 1428 payload bytes per segment, as siw sends at MSS 1448.
	require.NoError(t, s.StartTagged([][]byte{msg}, 1442, 0x40, 0x2222, 0x1000))
	require.Equal(t, uint64(4000), s.Len())
	hdrs, payloads, lasts := collect(t, &s)
	require.Len(t, hdrs, 3)
	require.Equal(t, []bool{false, false, true}, lasts)
	var got []byte
	for i, h := range hdrs {
		th, ok := ParseTagged(h)
		require.True(t, ok)
		require.Len(t, h, TaggedHeaderLen)
		require.True(t, th.Control().Tagged())
		require.Equal(t, lasts[i], th.Control().Last())
		require.Equal(t, uint8(1), th.Control().Version())
		require.Equal(t, byte(0x40), th.RsvdULP())
		require.Equal(t, uint32(0x2222), th.STag())
		require.Equal(t, uint64(0x1000+len(got)), th.TO(), "TO advances by payload sent")
		p := join(payloads[i])
		if !lasts[i] {
			require.Len(t, p, 1428)
		}
		got = append(got, p...)
	}
	require.Equal(t, msg, got)
	require.True(t, s.Done())
	_, ok := s.Next(nil, nil)
	require.False(t, ok)
}

func TestSegmenter_RFC5041_5_Untagged(t *testing.T) {
	msg := message(3000)
	var s Segmenter
	require.NoError(t, s.StartUntagged([][]byte{msg}, 1442, 0x44, 0xabcd, 0, 7))
	hdrs, payloads, lasts := collect(t, &s)
	require.Len(t, hdrs, 3)
	mo := 0
	for i, h := range hdrs {
		uh, ok := ParseUntagged(h)
		require.True(t, ok)
		require.False(t, uh.Control().Tagged())
		require.Equal(t, i == len(hdrs)-1, uh.Control().Last(), "L only on the last")
		require.Equal(t, lasts[i], uh.Control().Last())
		require.Equal(t, byte(0x44), uh.RsvdULP())
		require.Equal(t, uint32(0xabcd), uh.RsvdULPWord())
		require.Equal(t, uint32(0), uh.QN())
		require.Equal(t, uint32(7), uh.MSN(), "same MSN on every segment")
		require.Equal(t, uint32(mo), uh.MO(), "MO advances")
		n := len(join(payloads[i]))
		if i < 2 {
			require.Equal(t, 1442-UntaggedHeaderLen, n)
		}
		mo += n
	}
	require.Equal(t, 3000, mo)
}

func TestSegmenter_ZeroLength(t *testing.T) {
	for _, pieces := range [][][]byte{nil, {}, {{}}, {{}, {}}} {
		var s Segmenter
		require.NoError(t, s.StartTagged(pieces, 100, 0x40, 1, 0))
		hdrs, payloads, lasts := collect(t, &s)
		require.Len(t, hdrs, 1)
		require.Empty(t, payloads[0])
		require.Equal(t, []bool{true}, lasts)
		require.Equal(t, testutil.Unhex(t, "c1 40 00000001 0000000000000000"), hdrs[0])

		require.NoError(t, s.StartUntagged(pieces, 100, 0x43, 0, 0, 1))
		hdrs, _, lasts = collect(t, &s)
		require.Len(t, hdrs, 1)
		require.Equal(t, []bool{true}, lasts)
		require.Equal(t, testutil.Unhex(t, "41 43 00000000 00000000 00000001 00000000"), hdrs[0])
	}
}

func TestSegmenter_ScatterGatherNoCopy(t *testing.T) {
	a, b, c := message(5), message(0), message(12)
	d := message(3)
	pieces := [][]byte{a, b, c, d}
	var s Segmenter
	// 6 payload bytes per segment: spans a|c, c, c|d.
	require.NoError(t, s.StartTagged(pieces, TaggedHeaderLen+6, 0x40, 9, 100))
	hdrs, payloads, _ := collect(t, &s)
	require.Len(t, hdrs, 4)
	require.Len(t, payloads[0], 2)
	require.Same(t, &a[0], &payloads[0][0][0])
	require.Same(t, &c[0], &payloads[0][1][0])
	require.Same(t, &c[1], &payloads[1][0][0])
	require.Same(t, &d[0], &payloads[2][1][0])
	var all []byte
	for _, p := range payloads {
		all = append(all, join(p)...)
	}
	require.Equal(t, join(pieces), all)
}

func TestSegmenter_AppendsToCallerBuffers(t *testing.T) {
	var hb [MaxHeaderLen + 2]byte
	hb[0], hb[1] = 0xee, 0xee
	pb := make([][]byte, 1, 4)
	pb[0] = []byte("prefix")
	var s Segmenter
	require.NoError(t, s.StartUntagged([][]byte{message(10)}, 100, 0x43, 0, 0, 1))
	seg, ok := s.Next(hb[:2], pb)
	require.True(t, ok)
	require.Len(t, seg.Header, 2+UntaggedHeaderLen)
	require.Equal(t, []byte{0xee, 0xee}, seg.Header[:2])
	require.Equal(t, unsafe.SliceData(hb[:]), unsafe.SliceData(seg.Header), "header written into the caller's array")
	require.Len(t, seg.Payload, 2)
	require.Equal(t, "prefix", string(seg.Payload[0]))
}

func TestSegmenter_StartErrors(t *testing.T) {
	var s Segmenter
	require.ErrorIs(t, s.StartTagged(nil, TaggedHeaderLen, 0, 0, 0), ErrMULPDU)
	require.True(t, s.Done())
	require.ErrorIs(t, s.StartUntagged(nil, UntaggedHeaderLen, 0, 0, 0, 1), ErrMULPDU)
	require.ErrorIs(t, s.StartTagged(nil, 65536, 0, 0, 0), ErrMULPDU)
	require.NoError(t, s.StartTagged(nil, 65535, 0, 0, 0))
	require.NoError(t, s.StartUntagged(nil, UntaggedHeaderLen+1, 0, 0, 0, 1))

	// RFC 5041 §7.1 check 5: TO + length = 2^64 wraps.
	require.ErrorIs(t, s.StartTagged([][]byte{message(10)}, 100, 0, 0, math.MaxUint64-9), ErrMessageTOWraps)
	_, ok := s.Next(nil, nil)
	require.False(t, ok, "a failed start produces no segments")
	require.NoError(t, s.StartTagged([][]byte{message(9)}, 100, 0, 0, math.MaxUint64-9))
	require.NoError(t, s.StartTagged(nil, 100, 0, 0, math.MaxUint64))
}

// RFC 5041 §5.2: "The ULP Message Length MUST be less than 2^32", for
// tagged messages as for untagged ones.
func TestSegmenter_RFC5041_5_2_MessageLimit(t *testing.T) {
	// 2^32 bytes of message without allocating them: the same slice many times.
	big := make([]byte, 1<<24)
	pieces := make([][]byte, 256)
	for i := range pieces {
		pieces[i] = big
	}
	var s Segmenter
	require.ErrorIs(t, s.StartUntagged(pieces, 1000, 0, 0, 0, 1), ErrMessageTooLong)
	require.NoError(t, s.StartUntagged(pieces[:255], 1000, 0, 0, 0, 1))
	require.ErrorIs(t, s.StartTagged(pieces, 1000, 0, 0, 0), ErrMessageTooLong)
	require.NoError(t, s.StartTagged(pieces[:255], 1000, 0, 0, 0))
}

func TestSegmenter_SteadyStateAllocs(t *testing.T) {
	msg := [][]byte{message(9000), message(700)}
	var s Segmenter
	var hb [MaxHeaderLen]byte
	pb := make([][]byte, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.StartTagged(msg, 1442, 0x40, 1, 0); err != nil {
			panic(err)
		}
		for {
			if _, ok := s.Next(hb[:0], pb[:0]); !ok {
				break
			}
		}
		if err := s.StartUntagged(msg, 1442, 0x43, 0, 0, 1); err != nil {
			panic(err)
		}
		for {
			if _, ok := s.Next(hb[:0], pb[:0]); !ok {
				break
			}
		}
	})
	require.Zero(t, allocs)
}
