package rdmap

import (
	"encoding/binary"
	"errors"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// Terminate Control field flags in the RFC layout: the byte after the error
// code (RFC 5040 §4).
const (
	flagM = 0x80 // DDP Segment Length valid
	flagD = 0x40 // DDP header included
	flagR = 0x20 // RDMAP header included
)

// Terminate is an outbound Terminate message (RFC 5040 §4): the error
// and what it attaches. The M flag is set when HasSegmentLen, D when
// DDPHeader is not empty, R when RDMAHeader is not empty.
type Terminate struct {
	Code termcode.Code
	// HasSegmentLen and SegmentLen: the DDP Segment Length of the offending
	// segment (M). We send the offending FPDU's ULPDU Length (DDP header
	// plus payload), as irdma, nes and urdma do; siw sends the payload
	// length only.
	HasSegmentLen bool
	SegmentLen    uint16
	// DDPHeader is the offending segment's DDP header, 14 or 18 bytes (D).
	DDPHeader []byte
	// RDMAHeader is the offending RDMA Read Request header, 28 bytes (R).
	RDMAHeader []byte
}

// Flags returns the M, D and R flags t is encoded with.
func (t *Terminate) Flags() (m, d, r bool) {
	return t.HasSegmentLen, len(t.DDPHeader) > 0, len(t.RDMAHeader) > 0
}

// Len returns the ULPDU length of t when encoded.
func (t *Terminate) Len() int {
	n := TerminateHeaderLen + len(t.DDPHeader) + len(t.RDMAHeader)
	if t.HasSegmentLen || len(t.DDPHeader) > 0 {
		n += 2
	}
	return n
}

// AppendTerminate appends the whole Terminate ULPDU: an untagged DDP header
// on QN 2 with MSN 1, MO 0 and L set (there is only one Terminate per
// stream), the RDMAP control field for opcode 7, the Terminate Control
// field in the RFC layout, then the DDP Segment Length field (present when
// M or D is set), the DDP header (D) and the Read Request header (R).
func AppendTerminate(b []byte, t *Terminate) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpTerminate), 0, QNTerminate, 1, 0)
	m, d, r := t.Flags()
	var flags byte
	if m {
		flags |= flagM
	}
	if d {
		flags |= flagD
	}
	if r {
		flags |= flagR
	}
	b = append(b, uint8(t.Code.Layer())<<4|t.Code.EType(), t.Code.ECode(), flags, 0)
	if m || d {
		b = binary.BigEndian.AppendUint16(b, t.SegmentLen)
	}
	b = append(b, t.DDPHeader...)
	return append(b, t.RDMAHeader...)
}

// attachPolicy says which headers a Terminate with code c carries when
// they are available (RFC 5040 §4.8 and its Figure 10):
//   - LLP errors, and local catastrophic errors (error type 0) of RDMAP and
//     DDP: nothing ("The DDP Header is not present if the Terminate Error
//     Type is a Local Catastrophic Error");
//   - RDMAP Remote Protection errors (0/1/x): the DDP header and, when the
//     offending message was a Read Request, its 28-byte header;
//   - every other DDP or RDMAP error, version errors included: the DDP
//     header.
func attachPolicy(c termcode.Code) (ddpHdr, rdmaHdr bool) {
	switch {
	case c.Layer() >= termcode.LLP:
		return false, false
	case c.EType() == 0:
		return false, false
	case c.Layer() == termcode.RDMAP && c.EType() == 1:
		return true, true
	}
	return true, false
}

// NewTerminate builds the Terminate to send for err, following the
// attachment policy above:
//   - an *Error or *ddp.Error supplies its code, header copies and segment
//     length; a DDP header is attached only when complete (14 or 18 bytes),
//     and M is set exactly when D is;
//   - any other error whose chain holds a termcode.Code (such as mpa's)
//     supplies only its code;
//   - an error without one is reported as RDMAP local catastrophic
//     (0/0/0x00).
//
// The returned slices refer to the copies held by err.
func NewTerminate(err error) Terminate {
	var (
		re              *Error
		de              *ddp.Error
		t               Terminate
		hdr, rr         []byte
		seg             int
		wantDDP, wantRR bool
	)
	switch {
	case errors.As(err, &re):
		t.Code, hdr, rr, seg = re.Code(), re.DDPHeader(), re.RDMAHeader(), re.SegmentLen
		wantDDP, wantRR = re.Cond.attach()
	case errors.As(err, &de):
		t.Code, hdr, seg = termcode.Code(de.Code), de.Header(), de.SegmentLen
		wantDDP, wantRR = attachPolicy(t.Code)
	default:
		t.Code, _ = termcode.Of(err) // termcode.RDMAPLocalCatastrophic (0) if none
		return t
	}
	if wantDDP && len(hdr) > 0 && len(hdr) == ddp.HeaderLen(ddp.Control(hdr[0])) {
		t.DDPHeader = hdr
		t.HasSegmentLen = true
		t.SegmentLen = uint16(min(max(seg, 0), ddp.MaxULPDU))
		if wantRR && len(rr) == ReadRequestBodyLen {
			t.RDMAHeader = rr
		}
	}
	return t
}
