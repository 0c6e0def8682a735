package ddp

import "encoding/binary"

// Header sizes, counted from the DDP Control Field; the 2-octet MPA ULPDU
// Length that precedes them on the wire belongs to MPA and is not included.
const (
	// TaggedHeaderLen is the tagged buffer model header (RFC 5041 §4):
	// control, one RsvdULP octet, STag (32 bits), TO (64 bits).
	TaggedHeaderLen = 14
	// UntaggedHeaderLen is the untagged buffer model header (RFC 5041 §4):
	// control, five RsvdULP octets, QN, MSN and MO (32 bits each).
	UntaggedHeaderLen = 18
	// MaxHeaderLen is the larger of the two.
	MaxHeaderLen = UntaggedHeaderLen
)

// Field offsets inside the headers.
const (
	offControl = 0
	offRsvdULP = 1
	offSTag    = 2
	offTO      = 6
	offULPWord = 2
	offQN      = 6
	offMSN     = 10
	offMO      = 14
)

// HeaderLen returns the header length implied by the T flag of c.
func HeaderLen(c Control) int {
	if c.Tagged() {
		return TaggedHeaderLen
	}
	return UntaggedHeaderLen
}

// Tagged is a view of a tagged buffer model header. Accessors read the
// underlying bytes in place; the slice must hold at least TaggedHeaderLen
// bytes (see [ParseTagged]).
type Tagged []byte

// ParseTagged returns the tagged header at the start of b, or false if b is
// shorter than a tagged header. It does not look at the control field.
func ParseTagged(b []byte) (Tagged, bool) {
	if len(b) < TaggedHeaderLen {
		return nil, false
	}
	return Tagged(b[:TaggedHeaderLen]), true
}

// Control returns the DDP Control Field.
func (h Tagged) Control() Control { return Control(h[offControl]) }

// RsvdULP returns the octet reserved for the ULP (the RDMAP control field).
func (h Tagged) RsvdULP() byte { return h[offRsvdULP] }

// STag returns the Data Sink Steering Tag.
func (h Tagged) STag() uint32 { return binary.BigEndian.Uint32(h[offSTag:]) }

// TO returns the Data Sink Tagged Offset of this segment's first payload byte.
func (h Tagged) TO() uint64 { return binary.BigEndian.Uint64(h[offTO:]) }

// AppendTagged appends a tagged header to b.
func AppendTagged(b []byte, c Control, rsvdULP byte, stag uint32, to uint64) []byte {
	b = append(b, byte(c), rsvdULP)
	b = binary.BigEndian.AppendUint32(b, stag)
	return binary.BigEndian.AppendUint64(b, to)
}

// Untagged is a view of an untagged buffer model header. The slice must
// hold at least UntaggedHeaderLen bytes (see [ParseUntagged]).
type Untagged []byte

// ParseUntagged returns the untagged header at the start of b, or false if
// b is shorter than an untagged header. It does not look at the control
// field.
func ParseUntagged(b []byte) (Untagged, bool) {
	if len(b) < UntaggedHeaderLen {
		return nil, false
	}
	return Untagged(b[:UntaggedHeaderLen]), true
}

// Control returns the DDP Control Field.
func (h Untagged) Control() Control { return Control(h[offControl]) }

// RsvdULP returns the first octet reserved for the ULP (the RDMAP control
// field).
func (h Untagged) RsvdULP() byte { return h[offRsvdULP] }

// RsvdULPWord returns octets 2–5 reserved for the ULP; RDMAP carries the
// Invalidate STag of a Send with Invalidate there.
func (h Untagged) RsvdULPWord() uint32 { return binary.BigEndian.Uint32(h[offULPWord:]) }

// QN returns the Queue Number.
func (h Untagged) QN() uint32 { return binary.BigEndian.Uint32(h[offQN:]) }

// MSN returns the Message Sequence Number.
func (h Untagged) MSN() uint32 { return binary.BigEndian.Uint32(h[offMSN:]) }

// MO returns the Message Offset of this segment's first payload byte.
func (h Untagged) MO() uint32 { return binary.BigEndian.Uint32(h[offMO:]) }

// AppendUntagged appends an untagged header to b.
func AppendUntagged(b []byte, c Control, rsvdULP byte, rsvdULPWord, qn, msn, mo uint32) []byte {
	b = append(b, byte(c), rsvdULP)
	b = binary.BigEndian.AppendUint32(b, rsvdULPWord)
	b = binary.BigEndian.AppendUint32(b, qn)
	b = binary.BigEndian.AppendUint32(b, msn)
	return binary.BigEndian.AppendUint32(b, mo)
}
