package rdmap

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// The layouts of RFC 7306 §5.2.1 (Atomic Request, 52 bytes after the
// untagged DDP header, QN 1), §5.2.2 (Atomic Response, 12 bytes, QN 3) and
// §4.1 (Immediate Data, 8 bytes, QN 0), byte for byte. The Atomic vectors
// are the ones tshark decodes (docs/rfc-notes/rfc7306.md).
func TestAtomicGolden_RFC7306_5_2(t *testing.T) {
	req := AppendAtomicRequest(nil, 2, AtomicRequestFields{Op: AtomicFetchAdd, ID: 7, STag: 0x1122, TO: 0x1000, Args: AtomicArgs{AddSwap: 5}})
	require.Equal(t, unhex(t, "414a 00000000 00000001 00000002 00000000 00000000 00000007 00001122 0000000000001000 0000000000000005 0000000000000000 0000000000000000 0000000000000000"), req)
	require.Len(t, req, AtomicRequestHeaderLen)
	resp := AppendAtomicResponse(nil, 1, 7, 42)
	require.Equal(t, unhex(t, "414b 00000000 00000003 00000001 00000000 00000007 000000000000002a"), resp)
	imm := AppendImmediate(nil, OpImmediateSE, 4, 0x0102030405060708)
	require.Equal(t, unhex(t, "4149 00000000 00000000 00000004 00000000 0102030405060708"), imm)

	cs := AtomicRequestFields{Op: AtomicCmpSwap, ID: 9, STag: 0xabcd, TO: 0x88, Args: AtomicArgs{AddSwap: 1, AddSwapMask: 2, Compare: 3, CompareMask: 4}}
	b := AppendAtomicRequest(nil, 5, cs)
	h, err := ParseWith(b, len(b), ExtRFC7306)
	require.NoError(t, err)
	require.Equal(t, cs, h.AtomicRequest().Fields())
	require.Equal(t, uint32(5), h.Untagged().MSN())
	require.Equal(t, uint8(2), b[ddp.UntaggedHeaderLen+3], "CmpSwap is subcode 2 (IANA)")

	h, err = ParseWith(resp, len(resp), ExtRFC7306)
	require.NoError(t, err)
	require.Equal(t, uint32(7), h.AtomicResponse().ID())
	require.Equal(t, uint64(42), h.AtomicResponse().Orig())
	h, err = ParseWith(imm, len(imm), ExtRFC7306)
	require.NoError(t, err)
	v, ok := h.Immediate()
	require.True(t, ok)
	require.Equal(t, uint64(0x0102030405060708), v)
	require.True(t, h.Op.Solicited())
}

// Not negotiated, every RFC 7306 opcode is an unknown one: 0/2/0x06 (what
// siw sends for any opcode above 7).
func TestRFC7306_NotNegotiated_UnexpectedOpcode(t *testing.T) {
	for _, b := range [][]byte{
		AppendAtomicRequest(nil, 1, AtomicRequestFields{}),
		AppendAtomicResponse(nil, 1, 1, 1),
		AppendImmediate(nil, OpImmediate, 1, 1),
		AppendImmediate(nil, OpImmediateSE, 1, 1),
	} {
		for _, ext := range []Extensions{0, ExtFlush} {
			_, err := ParseWith(b, len(b), ext)
			c, _ := termcode.Of(err)
			require.Equal(t, termcode.RDMAPUnexpectedOpcode, c, "%x", b[:2])
		}
	}
}

func TestRFC7306_Malformed(t *testing.T) {
	req := AppendAtomicRequest(nil, 1, AtomicRequestFields{Op: AtomicFetchAdd, ID: 1, STag: 2, TO: 8})
	mut := func(b []byte, f func([]byte)) []byte { c := bytes.Clone(b); f(c); return c }
	for _, tc := range []struct {
		name  string
		b     []byte
		ulpdu int
		want  Condition
	}{
		{"payload after the Atomic Request", append(bytes.Clone(req), 0), len(req) + 1, AtomicMalformed},
		{"L clear", mut(req, func(b []byte) { b[0] &^= 0x40 }), len(req), AtomicMalformed},
		{"MO not 0", mut(req, func(b []byte) { b[17] = 1 }), len(req), AtomicMalformed},
		{"RsvdULP word", mut(req, func(b []byte) { b[5] = 1 }), len(req), AtomicMalformed},
		{"reserved subcode 1", mut(req, func(b []byte) { b[21] = 1 }), len(req), AtomicMalformed},
		{"reserved bits", mut(req, func(b []byte) { b[18] = 0x80 }), len(req), AtomicMalformed},
		{"QN 0", mut(req, func(b []byte) { b[9] = 0 }), len(req), UntaggedInvalidQN},
		{"too short", req[:40], 40, SegmentTooShort},
		{"T flag", mut(req, func(b []byte) { b[0] |= 0x80 }), len(req), TaggedFlagMismatch},
		{"Immediate with 9 bytes", append(AppendImmediate(nil, OpImmediate, 1, 1), 0), 27, AtomicMalformed},
		{"Immediate on QN 1", mut(AppendImmediate(nil, OpImmediate, 1, 1), func(b []byte) { b[9] = 1 }), 26, UntaggedInvalidQN},
		{"Atomic Response on QN 1", mut(AppendAtomicResponse(nil, 1, 1, 1), func(b []byte) { b[9] = 1 }), 30, UntaggedInvalidQN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWith(tc.b, tc.ulpdu, ExtRFC7306|ExtFlush)
			require.ErrorIs(t, err, tc.want, "%v", err)
		})
	}
}

// RFC 7306 §5.2.1 mask semantics, against a bit-by-bit model.
func TestAtomicApply_Masks_RFC7306_5_2_1(t *testing.T) {
	// Plain FetchAdd and CmpSwap.
	require.Equal(t, uint64(12), AtomicFetchAdd.Apply(5, AtomicArgs{AddSwap: 7}))
	require.Equal(t, uint64(0), AtomicFetchAdd.Apply(^uint64(0), AtomicArgs{AddSwap: 1}))
	all := ^uint64(0)
	require.Equal(t, uint64(9), AtomicCmpSwap.Apply(5, AtomicArgs{AddSwap: 9, AddSwapMask: all, Compare: 5, CompareMask: all}))
	require.Equal(t, uint64(5), AtomicCmpSwap.Apply(5, AtomicArgs{AddSwap: 9, AddSwapMask: all, Compare: 4, CompareMask: all}))
	// Two 32-bit counters in one word: the low one's carry does not
	// reach the high one.
	m := uint64(1)<<63 | 1<<31
	require.Equal(t, uint64(1)<<32, AtomicFetchAdd.Apply(1<<32|0xffffffff, AtomicArgs{AddSwap: 1, AddSwapMask: m}))
	// Compare only the low byte, swap only the high byte.
	require.Equal(t, uint64(0xab00_0000_0000_1234), AtomicCmpSwap.Apply(0x1234, AtomicArgs{AddSwap: 0xab00_0000_0000_0000, AddSwapMask: 0xff00_0000_0000_0000, Compare: 0xff34, CompareMask: 0xff}))
	require.Equal(t, uint64(0x1234), AtomicOp(1).Apply(0x1234, AtomicArgs{AddSwap: 1}))

	model := func(old, add, mask uint64) uint64 {
		var out, carry uint64
		for i := 0; i < 64; i++ {
			a, b := old>>i&1, add>>i&1
			s := a + b + carry
			out |= (s & 1) << i
			carry = s >> 1
			if mask>>i&1 != 0 {
				carry = 0
			}
		}
		return out
	}
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < 2000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		old, add, mask := x, bits.RotateLeft64(x, 21)*3, bits.RotateLeft64(x, 7)&bits.RotateLeft64(x, 40)
		require.Equal(t, model(old, add, mask), AtomicFetchAdd.Apply(old, AtomicArgs{AddSwap: add, AddSwapMask: mask}), "old %#x add %#x mask %#x", old, add, mask)
	}
}

// FuzzParseWith: in every negotiated mode, ParseWith never panics, every
// error has a Terminate code, an extension opcode is accepted only when
// its extension is negotiated, and an accepted RFC 7306 message
// re-encodes to its bytes.
func FuzzParseWith(f *testing.F) {
	parseSeeds(f)
	f.Add(AppendAtomicRequest(nil, 1, AtomicRequestFields{Op: AtomicCmpSwap, ID: 3, STag: 4, TO: 8}), uint16(70))
	f.Add(AppendAtomicResponse(nil, 1, 3, 99), uint16(30))
	f.Add(AppendImmediate(nil, OpImmediate, 1, 7), uint16(26))
	f.Add(AppendFlushRequest(nil, 1, FlushRequestFields{ID: 1, Placement: PlaceVisibility}), uint16(46))
	f.Add(AppendFlushResponse(nil, 1, FlushResponseFields{ID: 1}), uint16(26))
	f.Fuzz(func(t *testing.T, b []byte, ulpdu uint16) {
		for _, ext := range []Extensions{0, ExtFlush, ExtRFC7306, ExtFlush | ExtRFC7306} {
			h, err := ParseWith(b, int(ulpdu), ext)
			if err != nil {
				if _, ok := termcode.Of(err); !ok && err != ddp.ErrShortBuffer {
					t.Fatalf("%v: error without a Terminate code: %v", ext, err)
				}
				_ = NewTerminate(err)
				continue
			}
			if h.Op.Extension()&^ext != 0 {
				t.Fatalf("%v accepted %v", ext, h.Op)
			}
			if h.Len > len(b) || h.Len+h.PayloadLen != int(ulpdu) {
				t.Fatalf("lengths: %+v", h)
			}
			if b[0]&0x3c != 0 || b[1]&0x30 != 0 {
				continue
			}
			var again []byte
			msn := uint32(0)
			if u := h.Untagged(); u != nil {
				msn = u.MSN()
			}
			switch h.Op {
			case OpAtomicRequest:
				again = AppendAtomicRequest(nil, msn, h.AtomicRequest().Fields())
			case OpAtomicResponse:
				r := h.AtomicResponse()
				again = AppendAtomicResponse(nil, msn, r.ID(), r.Orig())
			case OpImmediate, OpImmediateSE:
				v, _ := h.Immediate()
				again = AppendImmediate(nil, h.Op, msn, v)
			default:
				continue
			}
			if !bytes.Equal(again, b[:h.Len]) {
				t.Fatalf("%v re-encodes to %x, not %x", h.Op, again, b[:h.Len])
			}
		}
	})
}

func ExampleAtomicOp_Apply() {
	// Two 32-bit counters in one word (RFC 7306 §5.2.1 Add Mask: each set
	// bit ends a field): adding 1 to each, the low one wraps alone.
	old := uint64(5)<<32 | 0xffffffff
	mask := uint64(1)<<63 | 1<<31
	v := AtomicFetchAdd.Apply(old, AtomicArgs{AddSwap: 1<<32 | 1, AddSwapMask: mask})
	fmt.Printf("%#x\n", v)
	// Output: 0x600000000
}
