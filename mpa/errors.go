package mpa

import (
	"errors"
	"fmt"
)

// ErrCode is an MPA error code: the Error Code of a Terminate message whose
// Layer is 2 (LLP) and Error Type is 0 (MPA). RFC 5044 defines 0x01–0x04
// and RFC 6581 adds 0x05–0x07 (IANA "RDDP" registry, mpa-errors).
type ErrCode uint8

// MPA error codes as registered with IANA.
const (
	CodeConnectionLost    ErrCode = 0x01 // TCP connection closed, terminated or lost
	CodeCRC               ErrCode = 0x02 // MPA CRC error
	CodeMarkerMismatch    ErrCode = 0x03 // MPA Marker and ULPDU Length field mismatch
	CodeInvalidFrame      ErrCode = 0x04 // invalid MPA Request or Reply frame
	CodeLocalCatastrophic ErrCode = 0x05 // local catastrophic error
	CodeInsufficientIRD   ErrCode = 0x06 // insufficient IRD resources
	CodeNoMatchingRTR     ErrCode = 0x07 // no matching RTR option
)

func (c ErrCode) String() string {
	switch c {
	case CodeConnectionLost:
		return "TCP connection closed, terminated or lost"
	case CodeCRC:
		return "MPA CRC error"
	case CodeMarkerMismatch:
		return "MPA Marker and ULPDU Length field mismatch"
	case CodeInvalidFrame:
		return "invalid MPA Request or Reply frame"
	case CodeLocalCatastrophic:
		return "local catastrophic error"
	case CodeInsufficientIRD:
		return "insufficient IRD resources"
	case CodeNoMatchingRTR:
		return "no matching RTR option"
	}
	return fmt.Sprintf("MPA error 0x%02x", uint8(c))
}

// TerminateCode returns the code in the form shared with the ddp and rdmap
// packages: layer<<12 | error type<<8 | error code, here 0x2000|code (layer
// 2 LLP, error type 0 MPA).
func (c ErrCode) TerminateCode() uint16 { return 0x2000 | uint16(c) }

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

// Error is an MPA protocol failure. Code is the MPA error code the upper
// layer reports in a Terminate (TerminateCode gives the shared encoding);
// Err is the sentinel for errors.Is.
//
// A Terminate can only be sent on an established FPDU stream: by the
// initiator once it has the Reply, and by either side while framing FPDUs.
// A responder that fails a Request has no stream yet: the failure is either
// answered with a Reply with R set (RejectReply) or with nothing, and the
// connection is then closed.
type Error struct {
	Code   ErrCode
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
	return fmt.Sprintf("%s (MPA error 0x%02x, %s)", s, uint8(e.Code), e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// TerminateCode returns 0x2000|Code; see ErrCode.TerminateCode.
func (e *Error) TerminateCode() uint16 { return e.Code.TerminateCode() }

func protoErr(code ErrCode, err error, format string, args ...any) *Error {
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
