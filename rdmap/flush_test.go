package rdmap

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/stretchr/testify/require"
)

var (
	testFlushReq = FlushRequestFields{ID: 0x01020304, STag: 0x00abcd01, TO: 0x1122334455667788,
		Length: 0x0000000100000000, Placement: PlacePersistence | PlaceVisibility}
	testFlushResp = FlushResponseFields{ID: 0x01020304, Status: FlushOK, Achieved: PlacePersistence | PlaceVisibility}
)

// The layouts of docs/rfc-notes/flush-extension.md, byte by byte.
func TestFlushExtension_Layout(t *testing.T) {
	req := AppendFlushRequest(nil, 7, testFlushReq)
	require.Equal(t, testutil.Unhex(t, `
		41 4f 00000000 00000001 00000007 00000000
		01 00 0003 01020304 00abcd01 1122334455667788 0000000100000000`), req)
	require.Len(t, req, FlushRequestHeaderLen)

	whole := AppendFlushRequest(nil, 1, FlushRequestFields{ID: 9, STag: 0x100, Placement: PlaceVisibility, WholeRegion: true})
	require.Equal(t, testutil.Unhex(t, `
		41 4f 00000000 00000001 00000001 00000000
		01 00 0011 00000009 00000100 0000000000000000 0000000000000000`), whole)

	resp := AppendFlushResponse(nil, 1, testFlushResp)
	require.Equal(t, testutil.Unhex(t, `41 4f 00000000 00000003 00000001 00000000 02 03 0000 01020304`), resp)
	require.Len(t, resp, FlushResponseHeaderLen)

	fail := AppendFlushResponse(nil, 2, FlushResponseFields{ID: 5, Status: FlushPersistFailed, Achieved: PlaceVisibility})
	require.Equal(t, testutil.Unhex(t, `41 4f 00000000 00000003 00000002 00000000 02 01 0002 00000005`), fail)
}

// A receiver peeks MaxHeaderLen bytes before classifying; a Flush Request
// must fit in that peek.
func TestFlushExtension_FitsHeaderPeek(t *testing.T) {
	require.LessOrEqual(t, FlushRequestHeaderLen, MaxHeaderLen)
	require.LessOrEqual(t, FlushResponseHeaderLen, MaxHeaderLen)
	require.Equal(t, ReadRequestBodyLen, FlushRequestBodyLen, "a Terminate attaches it where a Read Request header goes")
}

func TestFlushExtension_RoundTrip(t *testing.T) {
	req := AppendFlushRequest(nil, 42, testFlushReq)
	h, err := ParseExtension(req, len(req))
	require.NoError(t, err)
	require.Equal(t, ExtFlushRequest, h.Type)
	require.Equal(t, uint32(42), h.MSN)
	require.Equal(t, testFlushReq, h.FlushRequest().Fields())
	require.Nil(t, h.FlushResponse())
	require.Equal(t, QNReadRequest, h.Untagged().QN())
	require.Equal(t, req, h.Bytes())

	resp := AppendFlushResponse(nil, 3, testFlushResp)
	h, err = ParseExtension(resp, len(resp))
	require.NoError(t, err)
	require.Equal(t, ExtFlushResponse, h.Type)
	require.Equal(t, uint32(3), h.MSN)
	require.Equal(t, testFlushResp, h.FlushResponse().Fields())
	require.Nil(t, h.FlushRequest())
}

// A peer that did not negotiate the extension sees an unexpected opcode
// (0/2/0x06), and tells it apart from the others with IsExtension.
func TestFlushExtension_UnnegotiatedIsUnexpectedOpcode(t *testing.T) {
	for _, b := range [][]byte{AppendFlushRequest(nil, 1, testFlushReq), AppendFlushResponse(nil, 1, testFlushResp)} {
		require.True(t, IsExtension(b))
		_, err := Parse(b, len(b))
		require.ErrorIs(t, err, UnexpectedOpcode)
		c, ok := termcode.Of(err)
		require.True(t, ok)
		require.Equal(t, termcode.RDMAPUnexpectedOpcode, c)
	}
	require.False(t, IsExtension(AppendReadRequest(nil, 1, ReadRequestFields{})))
	require.False(t, IsExtension(AppendWrite(nil, true, 1, 0)))
	require.False(t, IsExtension([]byte{0x41}))
}

func TestFlushExtension_Errors(t *testing.T) {
	req := AppendFlushRequest(nil, 1, testFlushReq)
	resp := AppendFlushResponse(nil, 1, testFlushResp)
	mut := func(src []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), src...)
		f(b)
		return b
	}
	cases := []struct {
		name  string
		b     []byte
		ulpdu int
		want  error
	}{
		{"DDP version", mut(req, func(b []byte) { b[0] = 0x42 }), 46, termcode.DDPUntaggedVersion},
		{"RDMAP version", mut(req, func(b []byte) { b[1] = 0x8f }), 46, RDMAPVersion},
		{"not the extension opcode", mut(req, func(b []byte) { b[1] = 0x41 }), 46, UnexpectedOpcode},
		{"tagged", mut(req, func(b []byte) { b[0] = 0xc1 }), 46, TaggedFlagMismatch},
		{"no extension type", req[:18], 18, SegmentTooShort},
		{"unknown extension type", mut(req, func(b []byte) { b[18] = 0x03 }), 46, UnexpectedOpcode},
		{"request cut short", req[:40], 40, SegmentTooShort},
		{"response cut short", resp[:22], 22, SegmentTooShort},
		{"request on QN 0", mut(req, func(b []byte) { b[9] = 0 }), 46, UntaggedInvalidQN},
		{"response on QN 1", mut(resp, func(b []byte) { b[9] = 1 }), 26, UntaggedInvalidQN},
		{"payload after the request", append(append([]byte(nil), req...), 0, 0), 48, ReadReqMalformed},
		{"L clear", mut(req, func(b []byte) { b[0] = 0x01 }), 46, ReadReqMalformed},
		{"MO not zero", mut(req, func(b []byte) { b[17] = 1 }), 46, ReadReqMalformed},
		{"RsvdULP word", mut(req, func(b []byte) { b[5] = 1 }), 46, ReadReqMalformed},
		{"reserved octet", mut(req, func(b []byte) { b[19] = 1 }), 46, ReadReqMalformed},
		{"reserved control bit", mut(req, func(b []byte) { b[21] |= 0x04 }), 46, ReadReqMalformed},
		{"no placement type", mut(req, func(b []byte) { b[21] = 0 }), 46, ReadReqMalformed},
		{"reserved achieved bit", mut(resp, func(b []byte) { b[19] = 0x04 }), 26, ReadReqMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseExtension(tc.b, tc.ulpdu)
			require.ErrorIs(t, err, tc.want)
			_, ok := termcode.Of(err)
			require.True(t, ok, "every error carries a Terminate code: %v", err)
		})
	}
	// The Terminate codes the design names.
	code := func(b []byte, n int) termcode.Code {
		_, err := ParseExtension(b, n)
		c, _ := termcode.Of(err)
		return c
	}
	require.Equal(t, termcode.RDMAPUnexpectedOpcode, code(mut(req, func(b []byte) { b[18] = 0x7f }), 46))
	require.Equal(t, termcode.RDMAPStreamCatastrophic, code(mut(req, func(b []byte) { b[21] = 0 }), 46))
	require.Equal(t, termcode.DDPUntaggedInvalidQN, code(mut(req, func(b []byte) { b[9] = 3 }), 46))

	// Fewer bytes than the segment holds is a caller error.
	_, err := ParseExtension(req[:30], 46)
	require.ErrorIs(t, err, ddp.ErrShortBuffer)
	_, err = ParseExtension(req[:18], 46)
	require.ErrorIs(t, err, ddp.ErrShortBuffer)
}

// An unknown status is reported as is (receivers treat it as a failure);
// statuses and placements print readably.
func TestFlushExtension_Names(t *testing.T) {
	resp := AppendFlushResponse(nil, 1, FlushResponseFields{ID: 1, Status: 99})
	h, err := ParseExtension(resp, len(resp))
	require.NoError(t, err)
	require.Equal(t, FlushStatus(99), h.FlushResponse().Status())
	require.Equal(t, "status 99", FlushStatus(99).String())
	require.Equal(t, "persist failed", FlushPersistFailed.String())
	require.Equal(t, "visibility|persistence", (PlaceVisibility | PlacePersistence).String())
	require.Equal(t, "none", Placement(0).String())
	require.Equal(t, "Flush Request", ExtFlushRequest.String())
	require.Equal(t, "extension type 0x7f", ExtType(0x7f).String())
}

func TestFlushExtension_ParseAllocs(t *testing.T) {
	req := AppendFlushRequest(nil, 1, testFlushReq)
	n := testing.AllocsPerRun(100, func() {
		h, err := ParseExtension(req, len(req))
		if err != nil || h.FlushRequest().Length() != testFlushReq.Length {
			panic("parse")
		}
	})
	require.Zero(t, n)
}

// FuzzParseExtension: ParseExtension never panics and every error has a
// Terminate code; an accepted message re-encodes to its own bytes, except
// for the reserved bits of the DDP and RDMAP control octets, which
// receivers ignore as Parse does (the extension's own reserved bits are
// rejected).
func FuzzParseExtension(f *testing.F) {
	f.Add(AppendFlushRequest(nil, 1, testFlushReq), uint16(46))
	f.Add(AppendFlushRequest(nil, 9, FlushRequestFields{Placement: PlaceVisibility, WholeRegion: true}), uint16(46))
	f.Add(AppendFlushResponse(nil, 1, testFlushResp), uint16(26))
	f.Add(AppendFlushResponse(nil, 1, testFlushResp)[:20], uint16(26))
	f.Add([]byte{0x41, 0x4f}, uint16(19))
	f.Fuzz(func(t *testing.T, b []byte, ulpdu uint16) {
		h, err := ParseExtension(b, int(ulpdu))
		if err != nil {
			if _, ok := termcode.Of(err); !ok && !errors.Is(err, ddp.ErrShortBuffer) {
				t.Fatalf("error without a Terminate code: %v", err)
			}
			_ = NewTerminate(err)
			return
		}
		var again []byte
		switch h.Type {
		case ExtFlushRequest:
			again = AppendFlushRequest(nil, h.MSN, h.FlushRequest().Fields())
		case ExtFlushResponse:
			again = AppendFlushResponse(nil, h.MSN, h.FlushResponse().Fields())
		default:
			t.Fatalf("accepted type %v", h.Type)
		}
		canon := append([]byte(nil), b[:len(again)]...)
		canon[0] &^= 0x3c
		canon[1] &^= 0x30
		if int(ulpdu) != len(again) || !bytes.Equal(again, canon) {
			t.Fatalf("ulpdu %d\n got % x\nwant % x", ulpdu, again, b[:min(len(b), len(again))])
		}
		// What the extension accepts, the base protocol refuses.
		if _, err := Parse(b, int(ulpdu)); !errors.Is(err, UnexpectedOpcode) {
			t.Fatalf("Parse accepted an extension message: %v", err)
		}
	})
}

// A target answers a Flush Request once the range is persistent.
func ExampleParseExtension() {
	in := AppendFlushRequest(nil, 1, FlushRequestFields{ID: 7, STag: 0x100, TO: 4096, Length: 512, Placement: PlacePersistence})
	h, err := ParseExtension(in, len(in))
	if err != nil {
		panic(err) // send NewTerminate(err)
	}
	req := h.FlushRequest()
	// ... check the STag, bounds and rights; persist [TO, TO+Length) ...
	out := AppendFlushResponse(nil, 1, FlushResponseFields{ID: req.ID(), Status: FlushOK, Achieved: PlaceVisibility | PlacePersistence})
	fmt.Printf("%v id %d: %d bytes at %d, %v; answer %d bytes\n", h.Type, req.ID(), req.Length(), req.TO(), req.Placement(), len(out))
	// Output: Flush Request id 7: 512 bytes at 4096, persistence; answer 26 bytes
}
