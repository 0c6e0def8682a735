package rdmap

import (
	"errors"
	"net"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// TerminateError reports a stream ended by a Terminate, sent (Remote false)
// or received (Remote true). It matches errors.Is targets of the same type
// with the same Code and Remote, and it unwraps to net.ErrClosed, because a
// Terminate always ends the stream.
type TerminateError struct {
	Remote bool
	Code   termcode.Code
	// Terminate is what was sent (local), or the attachments found in what
	// was received (remote).
	Terminate Terminate
	// Received is the decoded Terminate with both readings of its control
	// field; nil for a local one.
	Received *ReceivedTerminate
	// Cause is the local error that made us send the Terminate.
	Cause error
	// Delivery says, for a local Terminate, whether it reached the socket;
	// DeliveryErr is why not.
	Delivery    Delivery
	DeliveryErr error
}

// Delivery is what became of a Terminate this side sends.
type Delivery uint8

const (
	// DeliveryPending: the stream failed and the Terminate is on its way.
	DeliveryPending Delivery = iota
	// DeliverySent: the Terminate was written to the socket.
	DeliverySent
	// DeliveryFailed: it could not be sent (the peer stopped reading, the
	// connection broke, or a write cut short left the stream in the middle
	// of an FPDU); DeliveryErr says why.
	DeliveryFailed
)

// LocalTerminateError returns the TerminateError for sending a Terminate
// because of err (see NewTerminate). If err already is a *TerminateError it
// is returned unchanged.
func LocalTerminateError(err error) *TerminateError {
	var te *TerminateError
	if errors.As(err, &te) {
		return te
	}
	t := NewTerminate(err)
	return &TerminateError{Code: t.Code, Terminate: t, Cause: err}
}

// Err returns the TerminateError for a Terminate received from the peer. It
// holds a copy of rt, so the parsed buffer may be reused.
func (rt *ReceivedTerminate) Err() *TerminateError {
	c := rt.Clone()
	rd := c.Chosen()
	t := Terminate{Code: rd.Code, DDPHeader: c.DDPHeader, RDMAHeader: c.RDMAHeader}
	if rd.M && c.SegmentLenPresent {
		t.HasSegmentLen, t.SegmentLen = true, c.SegmentLen
	}
	return &TerminateError{Remote: true, Code: rd.Code, Terminate: t, Received: c}
}

func (e *TerminateError) Error() string {
	if e.Remote {
		s := "rdmap: peer sent Terminate: " + e.Code.String()
		if e.Received != nil && e.Received.Layout == LayoutSIW {
			s += " [" + LayoutSIW.String() + "]"
		}
		return s
	}
	var s string
	switch e.Delivery {
	case DeliverySent:
		s = "rdmap: sent Terminate: " + e.Code.String()
	case DeliveryFailed:
		s = "rdmap: Terminate not sent"
		if e.DeliveryErr != nil {
			s += " (" + e.DeliveryErr.Error() + ")"
		}
		s += ": " + e.Code.String()
	default:
		s = "rdmap: sending Terminate: " + e.Code.String()
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is a *TerminateError with the same Code and
// Remote.
func (e *TerminateError) Is(target error) bool {
	t, ok := target.(*TerminateError)
	return ok && t.Code == e.Code && t.Remote == e.Remote
}

// Unwrap returns net.ErrClosed, the Terminate code and, for a local
// Terminate, its cause.
func (e *TerminateError) Unwrap() []error {
	if e.Cause != nil {
		return []error{net.ErrClosed, e.Code, e.Cause}
	}
	return []error{net.ErrClosed, e.Code}
}
