package mpa

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Connect runs the initiator's side of connection setup on c: it sends the
// Request, waits for the Reply and checks it. It writes nothing after the
// Request until the Reply is in, and reads exactly the Reply, so FPDUs the
// responder sends right behind it stay unread in c for the FPDU Reader.
//
// ctx bounds the exchange: its deadline becomes c's deadline and
// cancelling it interrupts blocked I/O. c's deadlines are cleared on return.
//
// On a protocol failure (an *Error) the initiator should send a Terminate
// with the error's code on c, then close it; a *RejectedError means the
// responder refused. Connect never closes c.
func Connect(ctx context.Context, c net.Conn, cfg *Config, privateData []byte) (*Result, error) {
	req, err := BuildRequest(cfg, privateData)
	if err != nil {
		return nil, err
	}
	var res Result
	err = withContext(ctx, c, func() error {
		if err := writeFrame(c, &req); err != nil {
			return err
		}
		rep, err := ReadFrame(c, cfg.maxRecvPD())
		if err != nil {
			return err
		}
		res, err = CheckReply(cfg, &req, &rep)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Request is a received MPA Request waiting for the responder's decision:
// inspect Frame (its PrivateData in particular), then call Accept or Reject
// exactly once.
type Request struct {
	Frame Frame
	c     net.Conn
	cfg   *Config
	done  bool
}

// ReadRequest reads the Request that opens a passive connection. It reads
// exactly the frame. A Request this side can never accept is answered here:
// with a Reply with R set when the failure calls for one (the *Error has
// RejectReply), otherwise with nothing; either way the caller closes c.
//
// ctx bounds the wait, as in Connect.
func ReadRequest(ctx context.Context, c net.Conn, cfg *Config) (*Request, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var f Frame
	err := withContext(ctx, c, func() error {
		var err error
		f, err = ReadFrame(c, cfg.maxRecvPD())
		var rep Frame
		switch {
		case err != nil:
			// Improperly formatted, including an enhanced Request too
			// short for its IRD/ORD block: closed without a Reply (RFC
			// 5044 §7.1.2 rule 2).
			return err
		case f.Kind != KindRequest:
			return protoErr(termcode.MPAInvalidFrame, ErrBadKey, "expected a Request, got a %s", f.Kind)
		default:
			// Run the checks that do not depend on the application's
			// answer so that a hopeless Request is refused before the
			// application sees it.
			rep, _, err = AnswerRequest(cfg, &f, nil)
			if err == nil {
				return nil
			}
		}
		var pe *Error
		if errors.As(err, &pe) && rep.Kind != 0 {
			if werr := writeFrame(c, &rep); werr != nil {
				pe.RejectReply = false
				return errors.Join(pe, werr)
			}
			pe.RejectReply = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Request{Frame: f, c: c, cfg: cfg}, nil
}

// Accept sends the Reply carrying privateData and returns the Result. The
// responder must then wait for the initiator's first FPDU before sending
// (Result.WaitForPeerFPDU).
func (r *Request) Accept(ctx context.Context, privateData []byte) (*Result, error) {
	if r.done {
		return nil, fmt.Errorf("%w: request already answered", ErrState)
	}
	rep, res, err := AnswerRequest(r.cfg, &r.Frame, privateData)
	var pe *Error
	if err != nil && !(errors.As(err, &pe) && rep.Kind != 0) {
		// Local limits (private data too long): the caller may still Reject.
		return nil, err
	}
	r.done = true
	werr := withContext(ctx, r.c, func() error { return writeFrame(r.c, &rep) })
	if err != nil {
		if werr != nil {
			pe.RejectReply = false
			return nil, errors.Join(err, werr)
		}
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	return &res, nil
}

// Reject sends a Reply with R set carrying privateData (which the
// initiator sees in its *RejectedError). The caller then closes the
// connection.
func (r *Request) Reject(ctx context.Context, privateData []byte) error {
	if r.done {
		return fmt.Errorf("%w: request already answered", ErrState)
	}
	rep, err := RejectReply(r.cfg, &r.Frame, privateData)
	if err != nil {
		return err
	}
	r.done = true
	return withContext(ctx, r.c, func() error { return writeFrame(r.c, &rep) })
}

// writeFrame sends f with a single Write, so that the frame leaves in as
// few segments as the stack allows.
func writeFrame(c net.Conn, f *Frame) error {
	var buf [FrameHeaderLen + MaxPrivateData]byte
	b, err := AppendFrame(buf[:0], f)
	if err != nil {
		return err
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("mpa: sending %s: %w", f.Kind, err)
	}
	return nil
}

// longAgo is a deadline in the past that unblocks pending I/O at once.
var longAgo = time.Unix(1, 0)

// withContext runs fn with c's deadline set from ctx and interrupted by
// ctx's cancellation, then clears the deadline. When ctx ended the
// exchange, its error is returned (wrapping the I/O error).
func withContext(ctx context.Context, c net.Conn, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mpa: %w", err)
	}
	if d, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(d); err != nil {
			return fmt.Errorf("mpa: setting deadline: %w", err)
		}
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = c.SetDeadline(longAgo)
	})
	err := fn()
	if !stop() {
		<-fired // the interrupt ran; let it finish before clearing
	}
	_ = c.SetDeadline(time.Time{})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("mpa: %w (%w)", cerr, err)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The connection deadline (from ctx) fired before ctx noticed.
			return fmt.Errorf("mpa: %w (%w)", context.DeadlineExceeded, err)
		}
	}
	return err
}
