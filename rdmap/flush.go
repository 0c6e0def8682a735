package rdmap

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// The Flush extension between iwarp-go peers (docs/rfc-notes/flush-extension.md).
// Its messages travel under one RDMAP opcode, the one the IANA registry
// reserves for experimental use, with an extension type in the first octet
// of the RDMAP header. They are never sent to a peer that did not set
// PeerFlagFlush in its private-data trailer ([ExtFlush]); a peer that did
// not set it answers them as [Parse] does, with Terminate 0/2/0x06.
const (
	// OpExtension is RDMAP opcode 0xF, "Reserved (Experimental)" in the
	// IANA RDDP registry. 0x8–0xB belong to RFC 7306; 0xC–0xE are left
	// for future assignment.
	OpExtension Opcode = 0xF

	// PeerFlagFlush is the bit of the flags octet of the iwarp-go
	// private-data trailer ("iWGo" | version | flags | 2 reserved) by
	// which a side declares that it answers Flush Requests.
	PeerFlagFlush byte = 0x01

	// QNFlushResponse is the untagged queue of Flush Responses: queue 3,
	// which RFC 7306 uses for the responses to the other non-Read requests
	// of queue 1 (Atomic Responses). Flush Requests travel on
	// QNReadRequest and take their MSN from that queue's sequence.
	QNFlushResponse uint32 = 3
)

// ExtType is the first octet of the RDMAP header of an OpExtension message.
type ExtType uint8

// Extension message types.
const (
	ExtFlushRequest  ExtType = 0x01
	ExtFlushResponse ExtType = 0x02
)

func (t ExtType) String() string {
	switch t {
	case ExtFlushRequest:
		return "Flush Request"
	case ExtFlushResponse:
		return "Flush Response"
	}
	return "extension type 0x" + hex2pad(uint8(t))
}

// Lengths, the headers counted from the DDP control field like the other
// header lengths of this package.
const (
	FlushRequestBodyLen    = 28
	FlushRequestHeaderLen  = ddp.UntaggedHeaderLen + FlushRequestBodyLen // 46
	FlushResponseBodyLen   = 8
	FlushResponseHeaderLen = ddp.UntaggedHeaderLen + FlushResponseBodyLen // 26
)

// Placement is a set of placement guarantees (the bit values of IBTA's
// FLUSH placement type).
type Placement uint8

// Placement types.
const (
	// PlaceVisibility: the bytes are in the region, visible to every
	// reader of it (other connections, the target application).
	PlaceVisibility Placement = 1 << 0
	// PlacePersistence: the bytes are in the target's persistence domain.
	PlacePersistence Placement = 1 << 1

	placeAll = PlaceVisibility | PlacePersistence
)

func (p Placement) String() string {
	if p == 0 {
		return "none"
	}
	var parts []string
	if p&PlaceVisibility != 0 {
		parts = append(parts, "visibility")
	}
	if p&PlacePersistence != 0 {
		parts = append(parts, "persistence")
	}
	if rest := p &^ placeAll; rest != 0 {
		parts = append(parts, "0x"+hex2pad(uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// FlushStatus is the outcome a Flush Response reports. Errors of the
// request itself (an STag, bounds or rights violation) are not statuses:
// they end the stream with a Terminate.
type FlushStatus uint16

// Statuses. A receiver treats any status it does not know as a failure.
const (
	// FlushOK: every placement type requested holds (Achieved says which).
	FlushOK FlushStatus = 0
	// FlushNotDurable: persistence was requested of a region that cannot
	// provide it (a volatile sink, or ordinary memory). Visibility holds.
	FlushNotDurable FlushStatus = 1
	// FlushPersistFailed: the target's persist failed (EIO, ENOSPC, a
	// media error). Visibility holds; persistence does not, and will not
	// for any later flush of that region.
	FlushPersistFailed FlushStatus = 2
)

func (s FlushStatus) String() string {
	switch s {
	case FlushOK:
		return "ok"
	case FlushNotDurable:
		return "not durable"
	case FlushPersistFailed:
		return "persist failed"
	}
	return "status " + strconv.Itoa(int(s))
}

// Control bits of a Flush Request (octets 2–3 of its RDMAP header).
const (
	flushCtlPlacementMask = 0x0003
	flushCtlWholeRegion   = 0x0010
	flushCtlKnown         = flushCtlPlacementMask | flushCtlWholeRegion
)

// FlushRequestFields are the values of a Flush Request.
type FlushRequestFields struct {
	// ID is chosen by the requester and echoed in the response.
	ID uint32
	// STag, TO and Length name the range: [TO, TO+Length) of the region
	// STag. With WholeRegion, TO and Length are ignored and the whole
	// region is meant.
	STag        uint32
	TO          uint64
	Length      uint64
	Placement   Placement
	WholeRegion bool
}

// FlushResponseFields are the values of a Flush Response.
type FlushResponseFields struct {
	ID     uint32
	Status FlushStatus
	// Achieved is the set of guarantees that hold for the range.
	Achieved Placement
}

// AppendFlushRequest appends a whole Flush Request: an untagged DDP header
// on QN 1 with L set, MO 0 and the given MSN (the next of queue 1's
// sequence, shared with RDMA Read Requests), then the 28-byte header:
//
//	0  ExtType (1) = 0x01 | Reserved (1) = 0 | Control (2)
//	4  Request ID (4)
//	8  STag (4)
//	12 Tagged Offset (8)
//	20 Length (8)
//
// Control: bits 1–0 placement (b0 visibility, b1 persistence), bit 4 whole
// region, the others zero.
func AppendFlushRequest(b []byte, msn uint32, f FlushRequestFields) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpExtension), 0, QNReadRequest, msn, 0)
	ctl := uint16(f.Placement) & flushCtlPlacementMask
	if f.WholeRegion {
		ctl |= flushCtlWholeRegion
	}
	b = append(b, byte(ExtFlushRequest), 0)
	b = binary.BigEndian.AppendUint16(b, ctl)
	b = binary.BigEndian.AppendUint32(b, f.ID)
	b = binary.BigEndian.AppendUint32(b, f.STag)
	b = binary.BigEndian.AppendUint64(b, f.TO)
	return binary.BigEndian.AppendUint64(b, f.Length)
}

// AppendFlushResponse appends a whole Flush Response: an untagged DDP
// header on QN 3 with L set, MO 0 and the given MSN (queue 3's own
// sequence, from 1), then the 8-byte header:
//
//	0  ExtType (1) = 0x02 | Achieved (1) | Status (2)
//	4  Request ID (4)
func AppendFlushResponse(b []byte, msn uint32, f FlushResponseFields) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpExtension), 0, QNFlushResponse, msn, 0)
	b = append(b, byte(ExtFlushResponse), byte(f.Achieved&placeAll))
	b = binary.BigEndian.AppendUint16(b, uint16(f.Status))
	return binary.BigEndian.AppendUint32(b, f.ID)
}

// FlushRequest is a view of the 28-byte Flush Request header. It is the
// header a Terminate about a Flush Request attaches (R flag), in the place
// of a Read Request header of the same length.
type FlushRequest []byte

// ID returns the Request ID.
func (r FlushRequest) ID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// STag returns the STag of the region to flush.
func (r FlushRequest) STag() uint32 { return binary.BigEndian.Uint32(r[8:]) }

// TO returns the Tagged Offset of the range's first byte.
func (r FlushRequest) TO() uint64 { return binary.BigEndian.Uint64(r[12:]) }

// Length returns the range's length.
func (r FlushRequest) Length() uint64 { return binary.BigEndian.Uint64(r[20:]) }

func (r FlushRequest) control() uint16 { return binary.BigEndian.Uint16(r[2:]) }

// Placement returns the guarantees requested.
func (r FlushRequest) Placement() Placement {
	return Placement(r.control() & flushCtlPlacementMask)
}

// WholeRegion reports whether the whole region is meant.
func (r FlushRequest) WholeRegion() bool { return r.control()&flushCtlWholeRegion != 0 }

// Fields returns the header's values.
func (r FlushRequest) Fields() FlushRequestFields {
	return FlushRequestFields{ID: r.ID(), STag: r.STag(), TO: r.TO(), Length: r.Length(),
		Placement: r.Placement(), WholeRegion: r.WholeRegion()}
}

// FlushResponse is a view of the 8-byte Flush Response header.
type FlushResponse []byte

// ID returns the Request ID the response answers.
func (r FlushResponse) ID() uint32 { return binary.BigEndian.Uint32(r[4:]) }

// Status returns the outcome.
func (r FlushResponse) Status() FlushStatus { return FlushStatus(binary.BigEndian.Uint16(r[2:])) }

// Achieved returns the guarantees that hold.
func (r FlushResponse) Achieved() Placement { return Placement(r[1]) }

// Fields returns the header's values.
func (r FlushResponse) Fields() FlushResponseFields {
	return FlushResponseFields{ID: r.ID(), Status: r.Status(), Achieved: r.Achieved()}
}

// ExtHeader is the classified header of an inbound OpExtension ULPDU. Its
// views alias the bytes given to ParseExtension.
type ExtHeader struct {
	Type ExtType
	// MSN is the message's sequence number on its queue (QNReadRequest
	// for a request, QNFlushResponse for a response).
	MSN uint32

	b []byte
}

// Bytes returns the whole header (DDP and RDMAP parts).
func (h *ExtHeader) Bytes() []byte { return h.b }

// Untagged returns the DDP header.
func (h *ExtHeader) Untagged() ddp.Untagged { return ddp.Untagged(h.b[:ddp.UntaggedHeaderLen]) }

// FlushRequest returns the Flush Request header, or nil for another type.
func (h *ExtHeader) FlushRequest() FlushRequest {
	if h.Type != ExtFlushRequest || h.b == nil {
		return nil
	}
	return FlushRequest(h.b[ddp.UntaggedHeaderLen:FlushRequestHeaderLen])
}

// FlushResponse returns the Flush Response header, or nil for another type.
func (h *ExtHeader) FlushResponse() FlushResponse {
	if h.Type != ExtFlushResponse || h.b == nil {
		return nil
	}
	return FlushResponse(h.b[ddp.UntaggedHeaderLen:FlushResponseHeaderLen])
}

// IsExtension reports whether b (at least the DDP and RDMAP control
// octets of a ULPDU) carries OpExtension in an untagged segment.
func IsExtension(b []byte) bool {
	return len(b) >= 2 && !ddp.Control(b[0]).Tagged() && ControlOpcode(b[1]) == OpExtension
}

// ParseExtension classifies and checks an inbound OpExtension ULPDU of
// length ulpduLen. b must hold its first min(ulpduLen, MaxHeaderLen) bytes.
// It is [ParseWith] with ExtFlush for a ULPDU known to carry OpExtension;
// a receiver that negotiated ExtFlush calls ParseWith for every ULPDU
// instead.
//
// Checks, in order, and the conditions they report:
//   - the DDP checks of [Parse] (version, segment too short);
//   - RDMAP version ≠ 1 (RDMAPVersion); opcode not OpExtension
//     (UnexpectedOpcode); T flag set (TaggedFlagMismatch);
//   - a ULPDU too short to hold the extension type (SegmentTooShort), or
//     an unknown extension type (UnexpectedOpcode, 0/2/0x06);
//   - a ULPDU shorter than the type's header (SegmentTooShort);
//   - QN not the type's queue (UntaggedInvalidQN, 1/2/0x01);
//   - payload after the header, L clear, MO ≠ 0, a non-zero RsvdULP
//     word or reserved bit, or a request with no placement type
//     (ReadReqMalformed, 0/2/0x07: the message is a single-segment request
//     or response like a Read Request, and malformed the same way).
//
// MSN sequencing and the region checks are the caller's. ParseExtension
// does not allocate unless it returns an error.
func ParseExtension(b []byte, ulpduLen int) (ExtHeader, error) {
	if _, err := ddp.CheckHeader(b, ulpduLen); err != nil {
		return ExtHeader{}, err
	}
	if ControlVersion(b[1]) != Version {
		return ExtHeader{}, NewError(RDMAPVersion, b, ulpduLen, nil)
	}
	if ControlOpcode(b[1]) != OpExtension {
		return ExtHeader{}, NewError(UnexpectedOpcode, b, ulpduLen, nil)
	}
	h, err := ParseWith(b, ulpduLen, ExtFlush)
	if err != nil {
		return ExtHeader{}, err
	}
	return ExtHeader{Type: h.Ext, MSN: h.Untagged().MSN(), b: h.b}, nil
}

// parseExtension checks the OpExtension ULPDU b (DDP checks, version,
// opcode and T flag done) and returns its type and header length.
func parseExtension(b []byte, ulpduLen int, c ddp.Control) (ExtType, int, error) {
	const u = ddp.UntaggedHeaderLen
	if ulpduLen <= u {
		return 0, 0, NewError(SegmentTooShort, b[:min(len(b), ulpduLen)], ulpduLen, nil)
	}
	if len(b) <= u {
		return 0, 0, ddp.ErrShortBuffer
	}
	t := ExtType(b[u])
	var n int
	var qn uint32
	switch t {
	case ExtFlushRequest:
		n, qn = FlushRequestHeaderLen, QNReadRequest
	case ExtFlushResponse:
		n, qn = FlushResponseHeaderLen, QNFlushResponse
	default:
		return 0, 0, NewError(UnexpectedOpcode, b, ulpduLen, nil)
	}
	if ulpduLen < n {
		return 0, 0, NewError(SegmentTooShort, b[:min(len(b), ulpduLen)], ulpduLen, nil)
	}
	if len(b) < n {
		return 0, 0, ddp.ErrShortBuffer
	}
	h := ddp.Untagged(b[:u])
	if h.QN() != qn {
		return 0, 0, NewError(UntaggedInvalidQN, b, ulpduLen, nil)
	}
	malformed := ulpduLen != n || !c.Last() || h.MO() != 0 || h.RsvdULPWord() != 0
	body := b[u:n]
	switch t {
	case ExtFlushRequest:
		r := FlushRequest(body)
		malformed = malformed || body[1] != 0 || r.control()&^flushCtlKnown != 0 || r.Placement() == 0
	case ExtFlushResponse:
		malformed = malformed || FlushResponse(body).Achieved()&^placeAll != 0
	}
	if malformed {
		return 0, 0, NewError(ReadReqMalformed, b, ulpduLen, nil)
	}
	return t, n, nil
}
