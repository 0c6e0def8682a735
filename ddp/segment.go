package ddp

import (
	"errors"
	"math"
)

// MaxULPDU is the largest ULPDU MPA can frame (a 16-bit length).
const MaxULPDU = math.MaxUint16

// Errors from starting a segmentation. They are local usage errors, not
// protocol errors.
var (
	ErrMULPDU         = errors.New("ddp: MULPDU must exceed the header length and be at most 65535")
	ErrMessageTooLong = errors.New("ddp: message longer than 2^32-1 bytes")
	ErrMessageTOWraps = errors.New("ddp: tagged message wraps the 64-bit tagged offset")
)

// Segment is one DDP segment produced by a [Segmenter].
type Segment struct {
	// Header is the caller's header buffer with this segment's DDP header
	// appended.
	Header []byte
	// Payload is the caller's payload slice with sub-slices of the
	// message's pieces appended: no payload byte is copied.
	Payload [][]byte
	// Len is the payload length, the sum of the lengths in Payload.
	Len int
	// Last is set on the message's final segment (the L flag).
	Last bool
}

// Segmenter splits one DDP message into segments that fit a maximum ULPDU
// length (MULPDU): each segment carries MULPDU minus the header length of
// payload, except the last which carries what remains (RFC 5041 §5).
// Tagged segments advance the TO by the payload already sent; untagged
// segments keep the MSN and advance the MO. Only the last segment has L
// set. A message of length zero is one segment with L and no payload.
//
// The message may be a scatter/gather list; a segment may span several
// pieces. Segments reference the pieces, which must not change until the
// segments are written. A Segmenter can be reused; in steady state it
// allocates nothing.
type Segmenter struct {
	pieces     [][]byte
	pi, po     int    // current piece and offset into it
	sent       uint64 // payload bytes already segmented
	total      uint64
	maxPayload int
	tagged     bool
	done       bool
	rsvdULP    byte
	ulpWord    uint32
	stag       uint32
	to         uint64
	qn, msn    uint32
}

func (s *Segmenter) start(pieces [][]byte, mulpdu, hdrLen int) error {
	if mulpdu <= hdrLen || mulpdu > MaxULPDU {
		*s = Segmenter{done: true}
		return ErrMULPDU
	}
	var total uint64
	for _, p := range pieces {
		total += uint64(len(p))
	}
	*s = Segmenter{pieces: pieces, total: total, maxPayload: mulpdu - hdrLen}
	return nil
}

// StartTagged begins a tagged message: payload pieces, the MULPDU, the
// RsvdULP octet (the RDMAP control field), the sink STag and the TO of the
// message's first byte.
func (s *Segmenter) StartTagged(pieces [][]byte, mulpdu int, rsvdULP byte, stag uint32, to uint64) error {
	if err := s.start(pieces, mulpdu, TaggedHeaderLen); err != nil {
		return err
	}
	// RFC 5041 §5.2: "The ULP Message Length MUST be less than 2^32";
	// §7.1 tagged check 5: the 64-bit sum of TO and length must not wrap,
	// so a message ending exactly at 2^64 does.
	if s.total > math.MaxUint32 {
		*s = Segmenter{done: true}
		return ErrMessageTooLong
	}
	if s.total > 0 && to > math.MaxUint64-s.total {
		*s = Segmenter{done: true}
		return ErrMessageTOWraps
	}
	s.tagged, s.rsvdULP, s.stag, s.to = true, rsvdULP, stag, to
	return nil
}

// StartUntagged begins an untagged message: payload pieces, the MULPDU,
// the five RsvdULP octets (the RDMAP control field and a 32-bit word: the
// Invalidate STag for Send with Invalidate, else 0), the queue number and
// the message's MSN.
func (s *Segmenter) StartUntagged(pieces [][]byte, mulpdu int, rsvdULP byte, rsvdULPWord, qn, msn uint32) error {
	if err := s.start(pieces, mulpdu, UntaggedHeaderLen); err != nil {
		return err
	}
	if s.total > math.MaxUint32 {
		*s = Segmenter{done: true}
		return ErrMessageTooLong
	}
	s.rsvdULP, s.ulpWord, s.qn, s.msn = rsvdULP, rsvdULPWord, qn, msn
	return nil
}

// Len returns the message length.
func (s *Segmenter) Len() uint64 { return s.total }

// Done reports whether the last segment has been produced.
func (s *Segmenter) Done() bool { return s.done }

// Next produces the next segment: its header is appended to hdr and its
// payload sub-slices to payload (pass hdr[:0] and payload[:0] of buffers
// with room for MaxHeaderLen bytes and as many slices as the message has
// pieces to stay allocation-free). It returns false once the last segment
// has been produced.
func (s *Segmenter) Next(hdr []byte, payload [][]byte) (Segment, bool) {
	if s.done {
		return Segment{}, false
	}
	n := int(min(uint64(s.maxPayload), s.total-s.sent))
	last := s.sent+uint64(n) == s.total
	if s.tagged {
		hdr = AppendTagged(hdr, MakeControl(true, last), s.rsvdULP, s.stag, s.to+s.sent)
	} else {
		hdr = AppendUntagged(hdr, MakeControl(false, last), s.rsvdULP, s.ulpWord, s.qn, s.msn, uint32(s.sent))
	}
	for need := n; need > 0; {
		p := s.pieces[s.pi][s.po:]
		if len(p) == 0 {
			s.pi, s.po = s.pi+1, 0
			continue
		}
		take := min(need, len(p))
		payload = append(payload, p[:take])
		need -= take
		s.po += take
	}
	s.sent += uint64(n)
	s.done = last
	return Segment{Header: hdr, Payload: payload, Len: n, Last: last}, true
}
