package ddp

import (
	"math"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// TaggedSegment is what the receive checks learned about one tagged segment.
type TaggedSegment struct {
	STag uint32
	TO   uint64 // tagged offset of the first payload byte
	Len  int    // payload length
	// First is set on the first segment of a message, Last on the final one.
	First, Last bool
	// Lookup is false only for a zero-length message (see
	// [ZeroLengthMessage]): nothing is placed and the STag is not checked.
	// Otherwise the caller must validate STag and [TO, TO+Len) against its
	// regions before placing the payload.
	Lookup bool
}

// ZeroLengthMessage reports whether the tagged segment h with segment
// length segLen is a whole message of length zero: L set and no payload.
//
// Such a message places nothing, so its STag and TO are not validated.
// This is what lets the RFC 6581 ready-to-receive message through: Linux
// siw sends a zero-length RDMA Write to STag 1, TO 0, irdma to STag 0, and
// cxgb4 to STag 1, TO 1, none of them a registered region. siw's receiver
// skips every STag check for a zero-length Write in the same way
// (siw_proc_write). Every other tagged segment, including a zero-length
// segment without L, goes through the full lookup.
func ZeroLengthMessage(h Tagged, segLen int) bool {
	return segLen == TaggedHeaderLen && h.Control().Last()
}

// toWraps reports whether the 64-bit unsigned sum of to and n wraps (RFC
// 5041 §7.1 tagged check 5): a payload ending exactly at 2^64 wraps, an
// empty one never does.
func toWraps(to uint64, n int) bool {
	return n > 0 && to > math.MaxUint64-uint64(n)
}

// TaggedReceiver checks the tagged segments of one DDP stream. Over an
// ordered transport the segments of a tagged message arrive in order and
// are not interleaved with another tagged message, so every segment after
// the first must carry the same STag and continue at the next TO. Linux siw
// enforces the same (siw_write_check_ntoh, siw_rresp_check_ntoh) and
// reports a changed STag as 1/1/0x00 and a gap as 1/1/0x01; so do we.
//
// The zero value is ready to use. It is not safe for concurrent use; one
// reader goroutine owns it.
type TaggedReceiver struct {
	active bool
	stag   uint32
	nextTO uint64
}

// InProgress reports whether a tagged message has begun but not ended.
func (r *TaggedReceiver) InProgress() bool { return r.active }

// Receive checks the tagged header h of a segment of length segLen (DDP
// header plus payload) and advances the message state. On error the state
// is left unchanged: the stream is about to be terminated.
func (r *TaggedReceiver) Receive(h Tagged, segLen int) (TaggedSegment, error) {
	c := h.Control()
	if c.Version() != Version {
		return TaggedSegment{}, NewError(termcode.DDPTaggedVersion, h, segLen)
	}
	if !c.Tagged() || segLen < TaggedHeaderLen {
		return TaggedSegment{}, NewError(termcode.DDPLocalCatastrophic, h, segLen)
	}
	s := TaggedSegment{
		STag:   h.STag(),
		TO:     h.TO(),
		Len:    segLen - TaggedHeaderLen,
		First:  !r.active,
		Last:   c.Last(),
		Lookup: true,
	}
	if toWraps(s.TO, s.Len) {
		return TaggedSegment{}, NewError(termcode.DDPTaggedTOWrap, h, segLen)
	}
	if r.active {
		if s.STag != r.stag {
			return TaggedSegment{}, NewError(termcode.DDPTaggedInvalidSTag, h, segLen)
		}
		if s.TO != r.nextTO {
			return TaggedSegment{}, NewError(termcode.DDPTaggedBaseBounds, h, segLen)
		}
	} else if ZeroLengthMessage(h, segLen) {
		s.Lookup = false
	}
	if s.Last {
		r.active = false
	} else {
		r.active, r.stag, r.nextTO = true, s.STag, s.TO+uint64(s.Len)
	}
	return s, nil
}
