package rdmap

import (
	"encoding/binary"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// RFC 7306 (RDMA Protocol Extensions): Atomic Operations and Immediate
// Data (docs/rfc-notes/rfc7306.md). Between iwarp-go peers they are
// negotiated as ExtRFC7306 (PeerFlagRFC7306 in the private-data trailer);
// a receiver that did not negotiate them answers their opcodes as unknown
// ones (0/2/0x06), which is what siw does.
const (
	// OpImmediate is an Immediate Data message (RFC 7306 §4.1): 8 bytes
	// on untagged queue 0 that consume a receive.
	OpImmediate Opcode = 0x8
	// OpImmediateSE is Immediate Data with Solicited Event.
	OpImmediateSE Opcode = 0x9
	// OpAtomicRequest is an Atomic Request, on untagged queue 1 with the
	// RDMA Read Requests, sharing their MSNs and IRD/ORD credits (RFC
	// 7306 §5.2.1).
	OpAtomicRequest Opcode = 0xA
	// OpAtomicResponse is an Atomic Response, on untagged queue 3 (RFC
	// 7306 §5.2.2).
	OpAtomicResponse Opcode = 0xB

	// ExtRFC7306 is the RFC 7306 extension; its trailer bit is
	// PeerFlagRFC7306.
	ExtRFC7306 Extensions = Extensions(PeerFlagRFC7306)
	// PeerFlagRFC7306 is the trailer flag by which a side declares that it
	// accepts the RFC 7306 opcodes.
	PeerFlagRFC7306 byte = 0x02

	// QNAtomicResponse is the untagged queue of Atomic Responses (IANA
	// "RDMAP DDP Untagged Queue Numbers", added by RFC 7306). It is the
	// queue the Flush extension's responses use too, with one MSN
	// sequence.
	QNAtomicResponse uint32 = 3
)

// Lengths, the headers counted from the DDP control field.
const (
	ImmediateDataLen        = 8
	ImmediateHeaderLen      = ddp.UntaggedHeaderLen + ImmediateDataLen      // 26
	AtomicRequestBodyLen    = 52                                            // RFC 7306 §5.2.1 figure
	AtomicRequestHeaderLen  = ddp.UntaggedHeaderLen + AtomicRequestBodyLen  // 70
	AtomicResponseBodyLen   = 12                                            // RFC 7306 §5.2.2 figure
	AtomicResponseHeaderLen = ddp.UntaggedHeaderLen + AtomicResponseBodyLen // 30
)

// AtomicOp is the Atomic Operation code of an Atomic Request (IANA "RDMAP
// Message Atomic Operation Subcodes").
type AtomicOp uint8

// Atomic operations. 0x1 is reserved, the rest unassigned.
const (
	AtomicFetchAdd AtomicOp = 0x0
	AtomicCmpSwap  AtomicOp = 0x2
)

func (o AtomicOp) String() string {
	switch o {
	case AtomicFetchAdd:
		return "FetchAdd"
	case AtomicCmpSwap:
		return "CmpSwap"
	}
	return "atomic op 0x" + hex2(uint8(o))
}

// Known reports whether o is an operation this package carries out.
func (o AtomicOp) Known() bool { return o == AtomicFetchAdd || o == AtomicCmpSwap }

// AtomicArgs are the operands of an atomic operation (RFC 7306 §5.2.1).
// For FetchAdd, AddSwap is the Add Data and AddSwapMask the Add Mask;
// for CmpSwap, they are the Swap Data and Swap Mask, and Compare and
// CompareMask the Compare Data and Compare Mask (unused by FetchAdd).
type AtomicArgs struct {
	AddSwap, AddSwapMask uint64
	Compare, CompareMask uint64
}

// Apply returns the new value of a target word that held old (RFC 7306
// §5.2.1):
//
//   - FetchAdd adds AddSwap to old in fields: each set bit of AddSwapMask
//     is the most significant bit of a field, whose carry out is
//     discarded instead of added into the next bit (a zero mask is one
//     64-bit addition);
//   - CmpSwap compares old with Compare in the bits of CompareMask and, if
//     they are equal there, replaces the bits of AddSwapMask with those of
//     AddSwap (all-ones masks are the unmasked compare-and-swap).
//
// An operation that is not Known returns old.
func (o AtomicOp) Apply(old uint64, a AtomicArgs) uint64 {
	switch o {
	case AtomicFetchAdd:
		m := a.AddSwapMask
		// The field's top bits are added without carry (XOR); the rest
		// with it, so a carry reaches a top bit and stops there.
		return ((old &^ m) + (a.AddSwap &^ m)) ^ ((old ^ a.AddSwap) & m)
	case AtomicCmpSwap:
		if (old^a.Compare)&a.CompareMask != 0 {
			return old
		}
		return old&^a.AddSwapMask | a.AddSwap&a.AddSwapMask
	}
	return old
}

// AtomicRequestFields are the values of an Atomic Request header.
type AtomicRequestFields struct {
	Op   AtomicOp
	ID   uint32 // Request Identifier, echoed by the response
	STag uint32 // Remote STag
	TO   uint64 // Remote Tagged Offset of the 8-byte target
	Args AtomicArgs
}

// AppendAtomicRequest appends a whole Atomic Request: an untagged DDP
// header on QN 1 with L set, MO 0 and the given MSN (the next of queue 1's
// sequence, shared with RDMA Read Requests), then the 52-byte header:
//
//	0  Reserved (28 bits) | Atomic Operation (4 bits)
//	4  Request Identifier (4)
//	8  Remote STag (4)
//	12 Remote Tagged Offset (8)
//	20 Add or Swap Data (8)
//	28 Add or Swap Mask (8)
//	36 Compare Data (8)
//	44 Compare Mask (8)
func AppendAtomicRequest(b []byte, msn uint32, f AtomicRequestFields) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpAtomicRequest), 0, QNReadRequest, msn, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(f.Op&0x0f))
	b = binary.BigEndian.AppendUint32(b, f.ID)
	b = binary.BigEndian.AppendUint32(b, f.STag)
	b = binary.BigEndian.AppendUint64(b, f.TO)
	b = binary.BigEndian.AppendUint64(b, f.Args.AddSwap)
	b = binary.BigEndian.AppendUint64(b, f.Args.AddSwapMask)
	b = binary.BigEndian.AppendUint64(b, f.Args.Compare)
	return binary.BigEndian.AppendUint64(b, f.Args.CompareMask)
}

// AppendAtomicResponse appends a whole Atomic Response: an untagged DDP
// header on QN 3 with L set, MO 0 and the given MSN (queue 3's own
// sequence, from 1), then the 12-byte header: the Original Request
// Identifier (4) and the Original Remote Data Value (8), the target's
// value before the operation.
func AppendAtomicResponse(b []byte, msn, id uint32, orig uint64) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpAtomicResponse), 0, QNAtomicResponse, msn, 0)
	b = binary.BigEndian.AppendUint32(b, id)
	return binary.BigEndian.AppendUint64(b, orig)
}

// AppendImmediate appends a whole Immediate Data message (op OpImmediate
// or OpImmediateSE): an untagged DDP header on QN 0 with L set, MO 0 and
// the given MSN (queue 0's, shared with Sends), then the 8 bytes of data.
// It panics for another op.
func AppendImmediate(b []byte, op Opcode, msn uint32, data uint64) []byte {
	if !op.immediate() {
		panic("rdmap: AppendImmediate with " + op.String())
	}
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(op), 0, QNSend, msn, 0)
	return binary.BigEndian.AppendUint64(b, data)
}

// AtomicRequest is a view of the 52-byte Atomic Request header.
type AtomicRequest []byte

// Op returns the Atomic Operation code.
func (r AtomicRequest) Op() AtomicOp { return AtomicOp(r[3] & 0x0f) }

// reserved returns the 28 reserved bits before the operation code.
func (r AtomicRequest) reserved() uint32 { return binary.BigEndian.Uint32(r) &^ 0x0f }

// ID returns the Request Identifier.
func (r AtomicRequest) ID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// STag returns the Remote STag.
func (r AtomicRequest) STag() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// TO returns the Remote Tagged Offset.
func (r AtomicRequest) TO() uint64 { return binary.BigEndian.Uint64(r[12:]) }

// Args returns the operands.
func (r AtomicRequest) Args() AtomicArgs {
	return AtomicArgs{
		AddSwap: binary.BigEndian.Uint64(r[20:]), AddSwapMask: binary.BigEndian.Uint64(r[28:]),
		Compare: binary.BigEndian.Uint64(r[36:]), CompareMask: binary.BigEndian.Uint64(r[44:]),
	}
}

// Fields returns the header's values.
func (r AtomicRequest) Fields() AtomicRequestFields {
	return AtomicRequestFields{Op: r.Op(), ID: r.ID(), STag: r.STag(), TO: r.TO(), Args: r.Args()}
}

// AtomicResponse is a view of the 12-byte Atomic Response header.
type AtomicResponse []byte

// ID returns the Original Request Identifier.
func (r AtomicResponse) ID() uint32 { return binary.BigEndian.Uint32(r) }

// Orig returns the Original Remote Data Value.
func (r AtomicResponse) Orig() uint64 { return binary.BigEndian.Uint64(r[4:]) }

// AtomicRequest returns the Atomic Request header, or nil for another
// message.
func (h *Header) AtomicRequest() AtomicRequest {
	if h.Op != OpAtomicRequest || h.b == nil {
		return nil
	}
	return AtomicRequest(h.b[ddp.UntaggedHeaderLen:AtomicRequestHeaderLen])
}

// AtomicResponse returns the Atomic Response header, or nil for another
// message.
func (h *Header) AtomicResponse() AtomicResponse {
	if h.Op != OpAtomicResponse || h.b == nil {
		return nil
	}
	return AtomicResponse(h.b[ddp.UntaggedHeaderLen:AtomicResponseHeaderLen])
}

// Immediate returns the data of an Immediate Data message, and whether h
// is one.
func (h *Header) Immediate() (uint64, bool) {
	if !h.Op.immediate() || h.b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(h.b[ddp.UntaggedHeaderLen:]), true
}

// check7306 applies the single-message rules of RFC 7306 to a header
// whose opcode, T flag, length and QN passed: every message is one whole
// DDP segment (L set, MO 0) of exactly its header, with zero reserved
// fields, and an Atomic Request names a known operation.
func check7306(op Opcode, b []byte, ulpduLen, n int, c ddp.Control) error {
	h := ddp.Untagged(b[:ddp.UntaggedHeaderLen])
	bad := ulpduLen != n || !c.Last() || h.MO() != 0 || h.RsvdULPWord() != 0
	if op == OpAtomicRequest {
		r := AtomicRequest(b[ddp.UntaggedHeaderLen:n])
		bad = bad || r.reserved() != 0 || !r.Op().Known()
	}
	if bad {
		return NewError(AtomicMalformed, b, ulpduLen, nil)
	}
	return nil
}
