package ddp

import (
	"errors"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// ErrShortBuffer means the caller handed over fewer header bytes than the
// segment holds: a caller bug, not a protocol error, so it carries no
// Terminate code. Callers must pass at least min(segment length,
// MaxHeaderLen) bytes.
var ErrShortBuffer = errors.New("ddp: fewer header bytes supplied than the segment holds")

// CheckHeader checks the DDP header at the start of b against the segment
// length segLen (the ULPDU length given by the lower layer): the version
// must be 1 (RFC 5041 §4.1; otherwise 1/1/0x04 tagged or 1/2/0x06
// untagged, per the T flag), and the segment must be long enough to hold
// the header its T flag implies (otherwise 1/0/0x00, see
// docs/rfc-notes/terminate.md, condition SegmentTooShort).
//
// It returns the control field. Reserved control bits are ignored, as
// receivers do.
func CheckHeader(b []byte, segLen int) (Control, error) {
	if segLen < 1 {
		return 0, NewError(termcode.DDPLocalCatastrophic, nil, segLen)
	}
	if len(b) < 1 {
		return 0, ErrShortBuffer
	}
	c := Control(b[0])
	if c.Version() != Version {
		if c.Tagged() {
			return c, NewError(termcode.DDPTaggedVersion, b, segLen)
		}
		return c, NewError(termcode.DDPUntaggedVersion, b, segLen)
	}
	n := HeaderLen(c)
	if segLen < n {
		return c, NewError(termcode.DDPLocalCatastrophic, b[:min(len(b), segLen)], segLen)
	}
	if len(b) < n {
		return c, ErrShortBuffer
	}
	return c, nil
}
