package rdmap

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
)

func parseSeeds(f *testing.F) {
	rr := ReadRequestFields{SinkSTag: 0x91cda700, SinkTO: 0x556368789550, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000}
	f.Add(AppendWrite(nil, true, 1, 0), uint16(14))
	f.Add(AppendWrite(nil, false, 0x2222, 0x2000), uint16(1442))
	f.Add(AppendReadResponse(nil, true, 0x91cda700, 0x556368789550), uint16(78))
	for op := OpSend; op <= OpSendSEInvalidate; op++ {
		f.Add(AppendSend(nil, op, true, 0x77, 2, 0), uint16(34))
	}
	f.Add(AppendReadRequest(nil, 1, rr), uint16(46))
	t := NewTerminate(ddp.NewError(termcode.DDPUntaggedNoBuffer, AppendSend(nil, OpSend, true, 0, 1, 0), 18))
	term := AppendTerminate(nil, &t)
	f.Add(term, uint16(len(term)))
	f.Add([]byte{0x41, 0x48}, uint16(26))
}

// FuzzParse: Parse never panics; an accepted header re-encodes, through the
// typed encoder for its opcode, to the bytes it came from whenever those
// bytes are canonical (reserved bits zero).
func FuzzParse(f *testing.F) {
	parseSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, ulpdu uint16) {
		h, err := Parse(b, int(ulpdu))
		if err != nil {
			if _, ok := termcode.Of(err); !ok && err != ddp.ErrShortBuffer {
				t.Fatalf("error without a Terminate code: %v", err)
			}
			_ = NewTerminate(err)
			return
		}
		if h.Len != h.Op.HeaderLen() || h.Len+h.PayloadLen != int(ulpdu) || h.Len > len(b) {
			t.Fatalf("lengths: %+v", h)
		}
		canonical := b[0]&0x3c == 0 && b[1]&0x30 == 0
		var again []byte
		switch h.Op {
		case OpWrite:
			again = AppendWrite(nil, h.Last, h.Tagged().STag(), h.Tagged().TO())
		case OpReadResponse:
			again = AppendReadResponse(nil, h.Last, h.Tagged().STag(), h.Tagged().TO())
		case OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate:
			canonical = canonical && (h.Op.Invalidates() || h.Untagged().RsvdULPWord() == 0)
			again = AppendSend(nil, h.Op, h.Last, h.InvalidateSTag(), h.Untagged().MSN(), h.Untagged().MO())
		case OpReadRequest:
			canonical = canonical && h.Untagged().RsvdULPWord() == 0 && h.Untagged().MO() == 0
			again = AppendReadRequest(nil, h.Untagged().MSN(), h.ReadRequest().Fields())
		case OpTerminate:
			rt, err := ParseTerminate(b[:min(len(b), int(ulpdu))])
			if err != nil {
				t.Fatalf("Parse accepted a Terminate ParseTerminate rejects: %v", err)
			}
			if !bytes.Equal(rt.Append(nil), b[:min(len(b), int(ulpdu))]) {
				t.Fatal("Terminate round trip")
			}
			return
		default:
			t.Fatalf("accepted undefined opcode %v", h.Op)
		}
		if canonical && !bytes.Equal(again, b[:h.Len]) {
			t.Fatalf("round trip %v: %x -> %x", h.Op, b[:h.Len], again)
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	f.Add(AppendReadRequestBody(nil, ReadRequestFields{SinkSTag: 0x91cda700, SinkTO: 0x556368789550, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000}))
	f.Add(make([]byte, 27))
	f.Fuzz(func(t *testing.T, b []byte) {
		rr, ok := ParseReadRequest(b)
		if ok != (len(b) >= ReadRequestBodyLen) {
			t.Fatal("length check")
		}
		if ok && !bytes.Equal(AppendReadRequestBody(nil, rr.Fields()), b[:ReadRequestBodyLen]) {
			t.Fatal("round trip")
		}
	})
}

// FuzzParseTerminate: any input decodes without panic, both readings are
// the two layouts of the same four bytes, the attachments stay inside the
// input, the choice follows the rule, and re-encoding gives the input back.
func FuzzParseTerminate(f *testing.F) {
	hdr := ddp.AppendUntagged(nil, ddp.MakeControl(false, true), MakeControl(OpTerminate), 0, QNTerminate, 1, 0)
	for _, tail := range [][]byte{
		{0x02, 0x02, 0, 0},
		{0x11, 0x00, 0x03, 0x00, 0x00, 0x40, 0xc1, 0x42, 0x3e, 0x73, 0x9b, 0, 0, 0, 0x56, 0x4f, 0x60, 0x6d, 0x55, 0x50},
		{0x21, 0x02, 0x03, 0x00},
		{0x10, 0x02, 0x07, 0x00, 0, 0},
		{0x20, 0x02, 0, 0},
		{0x01, 0x00, 0xe0, 0x00, 0x00, 0x2e},
		{0x23, 0x02, 0, 0, 0xde, 0xad},
	} {
		f.Add(append(append([]byte(nil), hdr...), tail...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rt, err := ParseTerminate(b)
		if err != nil {
			if len(b) >= TerminateHeaderLen && !ddp.Control(b[0]).Tagged() && ControlOpcode(b[1]) == OpTerminate {
				t.Fatalf("rejected a Terminate: %v", err)
			}
			return
		}
		w := rt.Control
		if rt.RFC != readControl(w, LayoutRFC) || rt.SIW != readControl(w, LayoutSIW) {
			t.Fatal("readings")
		}
		if rt.RFC.encode(LayoutRFC) != w || rt.SIW.encode(LayoutSIW) != w {
			t.Fatal("each reading re-encodes to the raw word in its layout")
		}
		rk, sk := rt.RFC.Code.Known(), rt.SIW.Code.Known()
		if rk && !sk && rt.Layout != LayoutRFC || sk && !rk && rt.Layout != LayoutSIW {
			t.Fatalf("layout %v for known rfc=%v siw=%v", rt.Layout, rk, sk)
		}
		n := 0
		if rt.SegmentLenPresent {
			n += 2
		}
		n += len(rt.DDPHeader) + len(rt.RDMAHeader) + len(rt.Trailing)
		if TerminateHeaderLen+n != len(b) {
			t.Fatalf("attachments cover %d of %d bytes", TerminateHeaderLen+n, len(b))
		}
		if rt.RDMAHeader != nil && len(rt.RDMAHeader) != ReadRequestBodyLen {
			t.Fatal("RDMA header length")
		}
		if !bytes.Equal(rt.Append(nil), b) {
			t.Fatalf("round trip %x", b)
		}
		te := rt.Err()
		if te.Code != rt.Code() || !te.Remote {
			t.Fatal("Err")
		}
		if rt.Chosen().M && rt.SegmentLenPresent && binary.BigEndian.Uint16(b[TerminateHeaderLen:]) != te.Terminate.SegmentLen {
			t.Fatal("segment length")
		}
	})
}
