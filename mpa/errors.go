package mpa

import (
	"errors"
	"fmt"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Sentinel errors. Protocol failures are returned as an *Error that wraps
// one of them, so errors.Is works on every path; the others are returned
// wrapped with context.
var (
	// Received MPA Request/Reply frames (*Error, code 0x04 unless noted).
	ErrBadKey            = errors.New("mpa: wrong key")
	ErrRevision          = errors.New("mpa: unsupported revision")
	ErrPrivateDataLength = errors.New("mpa: private data too long")
	ErrTruncated         = errors.New("mpa: truncated frame")
	ErrShortEnhanced     = errors.New("mpa: enhanced frame without the 4-byte IRD/ORD block")
	ErrRevisionMismatch  = errors.New("mpa: reply revision does not answer the request")
	ErrMarkersRefused    = errors.New("mpa: peer asks for markers, which this side refuses")
	ErrCRCRequired       = errors.New("mpa: CRC required but the reply does not enable it")
	ErrInsufficientIRD   = errors.New("mpa: peer's ORD exceeds this side's IRD")         // code 0x06
	ErrNoMatchingRTR     = errors.New("mpa: no matching RTR option")                     // code 0x07
	ErrConnectionLost    = errors.New("mpa: connection closed in the middle of a frame") // code 0x01

	// Received FPDUs (*Error).
	ErrCRC         = errors.New("mpa: CRC mismatch")                      // code 0x02
	ErrMarker      = errors.New("mpa: marker does not point at the FPDU") // code 0x03
	ErrULPDULength = errors.New("mpa: ULPDU length over the limit")       // code 0x03

	// Not protocol failures: no Terminate is implied.
	ErrRejected    = errors.New("mpa: connection rejected by the peer")
	ErrConfig      = errors.New("mpa: invalid configuration")
	ErrSiwLimit    = errors.New("mpa: private data too long for a siw peer")
	ErrFPDUTooLong = errors.New("mpa: ULPDU too long to frame")
	ErrState       = errors.New("mpa: call out of order")
)

// Error is an MPA protocol failure. Code is the Terminate code the upper
// layer reports (an LLP code, layer 2); Err is the sentinel for errors.Is.
// Both are in the error's chain: errors.As finds the termcode.Code.
//
// A Terminate can only be sent on an established FPDU stream: by the
// initiator once it has the Reply, and by either side while framing FPDUs.
// A responder that fails a Request has no stream yet: the failure is either
// answered with a Reply with R set (RejectReply) or with nothing, and the
// connection is then closed.
type Error struct {
	Code   termcode.Code
	Err    error
	Detail string
	// RejectReply reports that the failure is answered with a Reply with R
	// set. AnswerRequest returns that frame for the caller to send;
	// ReadRequest and Accept have sent it (if the send fails, RejectReply
	// is false and the send error is joined).
	RejectReply bool
}

func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return fmt.Sprintf("%s (%s)", s, e.Code)
}

// Unwrap returns the sentinel and the code.
func (e *Error) Unwrap() []error { return []error{e.Err, e.Code} }

func protoErr(code termcode.Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Err: err, Detail: fmt.Sprintf(format, args...)}
}

// RejectedError reports that the peer answered the Request with a Reply
// whose R bit is set. It matches ErrRejected with errors.Is.
type RejectedError struct {
	// Reply is the reject frame as received.
	Reply Frame
	// PrivateData is the application part of the reply's private data
	// (after the IRD/ORD block when one is present).
	PrivateData []byte
}

func (e *RejectedError) Error() string {
	if len(e.PrivateData) == 0 {
		return ErrRejected.Error()
	}
	return fmt.Sprintf("%s (private data %q)", ErrRejected, e.PrivateData)
}

func (e *RejectedError) Unwrap() error { return ErrRejected }
