package rdmap

import (
	"encoding/binary"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// Layout is a way of reading the 32-bit Terminate Control field.
type Layout uint8

const (
	// LayoutRFC is RFC 5040's: byte 0 = layer<<4 | etype, byte 1 = error
	// code, M/D/R = 0x80/0x40/0x20 of byte 2, the rest reserved.
	LayoutRFC Layout = iota
	// LayoutSIW is what Linux siw sends from little-endian hosts: its C
	// bit-fields put byte 0 = etype<<4 | layer and M/D/R at 0x01/0x02/0x04
	// of byte 2 (struct iwarp_terminate in drivers/infiniband/sw/siw/iwarp.h,
	// declared layer:4, etype:4, ecode:8, flag_m, flag_d, flag_r under
	// __LITTLE_ENDIAN_BITFIELD; mpa-host-client.pcap shows it). urdma puts
	// its M/D/R flags at the same bits (rdmap_hdrct_m/_d/_r = 1/2/4 in its
	// include/proto.h).
	LayoutSIW
)

func (l Layout) String() string {
	if l == LayoutSIW {
		return "siw little-endian layout"
	}
	return "RFC layout"
}

// Reading is the Terminate Control field decoded in one layout.
type Reading struct {
	Code    termcode.Code
	M, D, R bool
	// Reserved holds the bits the layout does not assign, in their
	// positions within bytes 2–3 of the field.
	Reserved uint16
}

func readControl(w [4]byte, l Layout) Reading {
	rd := Reading{}
	if l == LayoutSIW {
		rd.Code = termcode.Make(termcode.Layer(w[0]&0x0f), w[0]>>4, w[1])
		rd.M, rd.D, rd.R = w[2]&0x01 != 0, w[2]&0x02 != 0, w[2]&0x04 != 0
		rd.Reserved = uint16(w[2]&0xf8)<<8 | uint16(w[3])
		return rd
	}
	rd.Code = termcode.Make(termcode.Layer(w[0]>>4), w[0]&0x0f, w[1])
	rd.M, rd.D, rd.R = w[2]&flagM != 0, w[2]&flagD != 0, w[2]&flagR != 0
	rd.Reserved = uint16(w[2]&0x1f)<<8 | uint16(w[3])
	return rd
}

func (rd Reading) encode(l Layout) [4]byte {
	var w [4]byte
	w[1] = rd.Code.ECode()
	w[3] = byte(rd.Reserved)
	w[2] = byte(rd.Reserved >> 8)
	if l == LayoutSIW {
		w[0] = rd.Code.EType()<<4 | uint8(rd.Code.Layer())
		w[2] |= b2u(rd.M) | b2u(rd.D)<<1 | b2u(rd.R)<<2
	} else {
		w[0] = uint8(rd.Code.Layer())<<4 | rd.Code.EType()
		w[2] |= b2u(rd.M)<<7 | b2u(rd.D)<<6 | b2u(rd.R)<<5
	}
	return w
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ReceivedTerminate is a Terminate from the peer, decoded leniently: the
// control field is kept raw and read in both layouts, one of which is
// chosen; the attached headers are located by the ULPDU length, never past
// it.
type ReceivedTerminate struct {
	// The DDP/RDMAP header as received. A conforming Terminate has L set,
	// QN 2, MSN 1 and MO 0 (see Conforming).
	DDPControl   ddp.Control
	RDMAPControl byte
	RsvdULPWord  uint32
	QN, MSN, MO  uint32

	// Control is the raw Terminate Control field; RFC and SIW are its two
	// readings and Layout says which was chosen.
	Control  [4]byte
	RFC, SIW Reading
	Layout   Layout

	// SegmentLenPresent reports that two bytes for the DDP Segment Length
	// followed the control field (they are present when the chosen reading
	// has M or D set and the ULPDU has room for them).
	SegmentLenPresent bool
	SegmentLen        uint16
	// DDPHeader is the terminated DDP header if D is set: 14 or 18 bytes as
	// its own T flag says, fewer if the ULPDU ends first.
	DDPHeader []byte
	// RDMAHeader is the terminated Read Request header if R is set and 28
	// bytes remain. siw sets R on Send errors without attaching anything;
	// then it is nil.
	RDMAHeader []byte
	// Trailing holds any bytes after what the flags account for.
	Trailing []byte
}

// Chosen returns the reading the decoder picked.
func (rt *ReceivedTerminate) Chosen() Reading {
	if rt.Layout == LayoutSIW {
		return rt.SIW
	}
	return rt.RFC
}

// Code returns the error code of the chosen reading.
func (rt *ReceivedTerminate) Code() termcode.Code { return rt.Chosen().Code }

// Conforming reports whether the DDP header is that of a Terminate: L set,
// QN 2, MSN 1, MO 0. siw logs a non-conforming one as bogus and closes;
// either way the stream ends.
func (rt *ReceivedTerminate) Conforming() bool {
	return rt.DDPControl.Last() && rt.QN == QNTerminate && rt.MSN == 1 && rt.MO == 0
}

// chooseLayout picks the reading whose code is known (registered, or the
// hardware MPA form 2/3/x); when both or neither are, the one whose flag
// bits are the ones set, defaulting to the RFC layout.
func chooseLayout(w [4]byte, rfc, siw Reading) Layout {
	rfcKnown, siwKnown := rfc.Code.Known(), siw.Code.Known()
	switch {
	case rfcKnown && !siwKnown:
		return LayoutRFC
	case siwKnown && !rfcKnown:
		return LayoutSIW
	}
	if w[2]&0xe0 == 0 && w[2]&0x07 != 0 {
		return LayoutSIW
	}
	return LayoutRFC
}

// ParseTerminate decodes a Terminate ULPDU (from the DDP control field to
// the end of the ULPDU; bytes beyond MaxTerminateLen need not be passed).
// It fails only if b is shorter than TerminateHeaderLen or is not a
// Terminate (untagged, opcode 7). The returned slices alias b.
func ParseTerminate(b []byte) (ReceivedTerminate, error) {
	if len(b) < TerminateHeaderLen {
		return ReceivedTerminate{}, NewError(SegmentTooShort, b, len(b), nil)
	}
	h := ddp.Untagged(b[:ddp.UntaggedHeaderLen])
	if h.Control().Tagged() || ControlOpcode(h.RsvdULP()) != OpTerminate {
		return ReceivedTerminate{}, NewError(UnexpectedOpcode, b, len(b), nil)
	}
	rt := ReceivedTerminate{
		DDPControl:   h.Control(),
		RDMAPControl: h.RsvdULP(),
		RsvdULPWord:  h.RsvdULPWord(),
		QN:           h.QN(),
		MSN:          h.MSN(),
		MO:           h.MO(),
	}
	copy(rt.Control[:], b[ddp.UntaggedHeaderLen:])
	rt.RFC, rt.SIW = readControl(rt.Control, LayoutRFC), readControl(rt.Control, LayoutSIW)
	rt.Layout = chooseLayout(rt.Control, rt.RFC, rt.SIW)
	rd := rt.Chosen()

	rest := b[TerminateHeaderLen:]
	if (rd.M || rd.D) && len(rest) >= 2 {
		rt.SegmentLenPresent, rt.SegmentLen = true, binary.BigEndian.Uint16(rest)
		rest = rest[2:]
	}
	if rd.D && len(rest) > 0 {
		n := min(ddp.HeaderLen(ddp.Control(rest[0])), len(rest))
		rt.DDPHeader, rest = rest[:n], rest[n:]
	}
	if rd.R && len(rest) >= ReadRequestBodyLen {
		rt.RDMAHeader, rest = rest[:ReadRequestBodyLen], rest[ReadRequestBodyLen:]
	}
	if len(rest) > 0 {
		rt.Trailing = rest
	}
	return rt, nil
}

// Append re-encodes rt exactly as received (the chosen layout, reserved
// bits and trailing bytes included) and appends it to b.
func (rt *ReceivedTerminate) Append(b []byte) []byte {
	b = ddp.AppendUntagged(b, rt.DDPControl, rt.RDMAPControl, rt.RsvdULPWord, rt.QN, rt.MSN, rt.MO)
	w := rt.Chosen().encode(rt.Layout)
	b = append(b, w[:]...)
	if rt.SegmentLenPresent {
		b = binary.BigEndian.AppendUint16(b, rt.SegmentLen)
	}
	b = append(b, rt.DDPHeader...)
	b = append(b, rt.RDMAHeader...)
	return append(b, rt.Trailing...)
}

// Clone returns a copy of rt that does not alias the parsed buffer.
func (rt *ReceivedTerminate) Clone() *ReceivedTerminate {
	c := *rt
	c.DDPHeader = cloneBytes(rt.DDPHeader)
	c.RDMAHeader = cloneBytes(rt.RDMAHeader)
	c.Trailing = cloneBytes(rt.Trailing)
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
