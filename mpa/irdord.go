package mpa

import "encoding/binary"

// IRDORDLen is the size of the RFC 6581 IRD/ORD block that opens the
// private data of an enhanced Request or Reply.
const IRDORDLen = 4

// Bits of the IRD/ORD block (RFC 6581; the same masks in siw, irdma, cxgb4
// and qed).
const (
	irdP2P      = 0x8000    // IRD word: peer-to-peer mode requested/acknowledged
	irdSendRTR  = 0x4000    // IRD word: zero-length Send RTR
	ordWriteRTR = 0x8000    // ORD word: zero-length RDMA Write RTR
	ordReadRTR  = 0x4000    // ORD word: zero-length RDMA Read RTR
	irdOrdMask  = MaxIRDORD // value field of both words
)

// MaxIRDORD is the largest value an IRD or ORD field can hold.
const MaxIRDORD = 0x3fff

// NoAutoIRDORD, the all-ones 14-bit value, in an IRD or ORD field says
// that "automatic negotiation of the IRD or ORD is not desired, and that
// the ULP will be responsible for it" (RFC 6581 §9.1). A responder answers
// an initiator ORD (IRD) of NoAutoIRDORD with IRD (ORD) NoAutoIRDORD and
// keeps its own value; an initiator receiving it keeps its own value too.
// This package never advertises it itself (Config.Validate).
const NoAutoIRDORD = MaxIRDORD

// RTR is a set of ready-to-receive message types (RFC 6581 peer-to-peer
// mode). A negotiated choice has exactly one bit set.
type RTR uint8

// RTR message types.
const (
	RTRSend  RTR = 1 << iota // zero-length Send
	RTRWrite                 // zero-length RDMA Write
	RTRRead                  // zero-length RDMA Read Request
)

const rtrAll = RTRSend | RTRWrite | RTRRead

func (r RTR) String() string {
	if r == 0 {
		return "none"
	}
	s := ""
	for _, t := range []struct {
		bit  RTR
		name string
	}{{RTRWrite, "Write"}, {RTRRead, "Read"}, {RTRSend, "Send"}} {
		if r&t.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += t.name
		}
	}
	if r&^rtrAll != 0 {
		s += "|?"
	}
	return s
}

// IRDORD is the decoded RFC 6581 block. All 32 bits are defined, so a
// parsed block encodes back to the same bytes.
type IRDORD struct {
	IRD, ORD uint16 // 14-bit values
	P2P      bool   // peer-to-peer mode
	RTR      RTR    // RTR types offered (request) or chosen (reply)
}

// IRDORDBlock is a byte-slice view of an encoded block (at least 4 bytes).
type IRDORDBlock []byte

// IRD returns the 14-bit IRD value.
func (b IRDORDBlock) IRD() uint16 { return binary.BigEndian.Uint16(b[0:2]) & irdOrdMask }

// ORD returns the 14-bit ORD value.
func (b IRDORDBlock) ORD() uint16 { return binary.BigEndian.Uint16(b[2:4]) & irdOrdMask }

// P2P reports the peer-to-peer bit.
func (b IRDORDBlock) P2P() bool { return binary.BigEndian.Uint16(b[0:2])&irdP2P != 0 }

// RTR returns the RTR type bits.
func (b IRDORDBlock) RTR() RTR {
	ird, ord := binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
	var r RTR
	if ird&irdSendRTR != 0 {
		r |= RTRSend
	}
	if ord&ordWriteRTR != 0 {
		r |= RTRWrite
	}
	if ord&ordReadRTR != 0 {
		r |= RTRRead
	}
	return r
}

// Decode returns the block's fields.
func (b IRDORDBlock) Decode() IRDORD {
	return IRDORD{IRD: b.IRD(), ORD: b.ORD(), P2P: b.P2P(), RTR: b.RTR()}
}

// AppendIRDORD appends the 4-byte encoding of v. Values above 0x3fff and
// unknown RTR bits are masked off; config validation keeps them out.
func AppendIRDORD(b []byte, v IRDORD) []byte {
	ird := v.IRD & irdOrdMask
	ord := v.ORD & irdOrdMask
	if v.P2P {
		ird |= irdP2P
	}
	if v.RTR&RTRSend != 0 {
		ird |= irdSendRTR
	}
	if v.RTR&RTRWrite != 0 {
		ord |= ordWriteRTR
	}
	if v.RTR&RTRRead != 0 {
		ord |= ordReadRTR
	}
	b = binary.BigEndian.AppendUint16(b, ird)
	return binary.BigEndian.AppendUint16(b, ord)
}
