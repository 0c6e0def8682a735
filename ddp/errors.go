package ddp

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Error is a DDP segment that failed a receive check. It carries what a
// Terminate reports about the offending segment: a copy of its DDP header
// (14 or 18 bytes, fewer if the segment was too short to hold one) and its
// segment length.
type Error struct {
	Code termcode.Code
	// SegmentLen is the length of the offending DDP segment as framed by the
	// lower layer: DDP header plus payload (the MPA ULPDU Length).
	SegmentLen int

	hdr    [MaxHeaderLen]byte
	hdrLen uint8
}

// NewError returns an *Error for code with a copy of the DDP header at the
// start of hdr and the offending segment length. The copy holds as many
// bytes as the header's T flag implies, but never more than hdr or the
// segment holds.
func NewError(code termcode.Code, hdr []byte, segLen int) *Error {
	e := &Error{Code: code, SegmentLen: segLen}
	e.hdrLen = copyHeader(&e.hdr, hdr, segLen)
	return e
}

// copyHeader copies the DDP header at the start of hdr into dst, bounded by
// the header length its T flag implies, len(hdr) and segLen.
func copyHeader(dst *[MaxHeaderLen]byte, hdr []byte, segLen int) uint8 {
	if len(hdr) == 0 || segLen <= 0 {
		return 0
	}
	n := min(HeaderLen(Control(hdr[0])), len(hdr), segLen)
	return uint8(copy(dst[:n], hdr))
}

// CopyHeader copies the DDP header at the start of hdr into dst as NewError
// does and returns the number of bytes copied.
func CopyHeader(dst *[MaxHeaderLen]byte, hdr []byte, segLen int) int {
	return int(copyHeader(dst, hdr, segLen))
}

// Header returns the copy of the offending DDP header. It is shorter than
// the header length if the segment was truncated, and empty if none was
// recorded.
func (e *Error) Header() []byte { return e.hdr[:e.hdrLen] }

// HeaderComplete reports whether the recorded header is a whole tagged or
// untagged header, as a Terminate's "Terminated DDP Header" must be.
func (e *Error) HeaderComplete() bool {
	return e.hdrLen > 0 && int(e.hdrLen) == HeaderLen(Control(e.hdr[0]))
}

// Unwrap returns the code, so that errors.As finds a termcode.Code (and
// errors.Is matches the code constants) whichever layer wraps e.
func (e *Error) Unwrap() error { return e.Code }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Error describes the failure and the offending header's fields.
func (e *Error) Error() string {
	h := e.Header()
	switch {
	case e.HeaderComplete() && Control(h[0]).Tagged():
		t := Tagged(h)
		return fmt.Sprintf("ddp: %v: tagged segment STag %#08x TO %#x, segment length %d",
			e.Code.String(), t.STag(), t.TO(), e.SegmentLen)
	case e.HeaderComplete():
		u := Untagged(h)
		return fmt.Sprintf("ddp: %v: untagged segment QN %d MSN %d MO %d, segment length %d",
			e.Code.String(), u.QN(), u.MSN(), u.MO(), e.SegmentLen)
	}
	return fmt.Sprintf("ddp: %v: segment length %d", e.Code.String(), e.SegmentLen)
}
