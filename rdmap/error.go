package rdmap

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// Error is a condition found in an inbound segment that must end the
// stream with a Terminate. It carries copies of what the Terminate may
// attach: the offending DDP header, its segment length, and for a Read
// Request its 28-byte header.
type Error struct {
	Cond Condition
	// SegmentLen is the offending segment's length as framed by MPA (DDP
	// header plus payload: the ULPDU Length).
	SegmentLen int

	ddpHdr [ddp.MaxHeaderLen]byte
	ddpLen uint8
	rdma   [ReadRequestBodyLen]byte
	hasRR  bool
}

// NewError returns the error for condition c. hdr holds the offending
// segment's DDP header (extra bytes are ignored; a header cut short by hdr
// or by segLen is kept as a truncated copy), segLen the segment's length,
// and rr the 28-byte Read Request header when the offending message is a
// Read Request (else nil).
func NewError(c Condition, hdr []byte, segLen int, rr []byte) *Error {
	e := &Error{Cond: c, SegmentLen: segLen}
	e.ddpLen = uint8(ddp.CopyHeader(&e.ddpHdr, hdr, segLen))
	if len(rr) >= ReadRequestBodyLen {
		copy(e.rdma[:], rr)
		e.hasRR = true
	}
	return e
}

// Code returns the Terminate code of the condition.
func (e *Error) Code() termcode.Code { return e.Cond.Code() }

// Unwrap returns the Terminate code, so that errors.As finds it whichever
// layer wraps e.
func (e *Error) Unwrap() error { return e.Cond.Code() }

// DDPHeader returns the copy of the offending DDP header (possibly
// truncated or empty).
func (e *Error) DDPHeader() []byte { return e.ddpHdr[:e.ddpLen] }

// RDMAHeader returns the copy of the offending Read Request header, or nil.
func (e *Error) RDMAHeader() []byte {
	if !e.hasRR {
		return nil
	}
	return e.rdma[:]
}

// Is matches a Condition, or an *Error with the same condition.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Cond == e.Cond
	case Condition:
		return t == e.Cond
	}
	return false
}

func (e *Error) Error() string {
	return fmt.Sprintf("rdmap: %s: %s, segment length %d", e.Cond.String(), e.Code().String(), e.SegmentLen)
}

// Error lets a Condition be used as an errors.Is target.
func (c Condition) Error() string { return "rdmap: " + c.String() }
