package iwtest

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
)

// endpoint is one side of an iwtest session: a queue pair with separate
// send and receive CQs, the control message buffers and the data buffer.
type endpoint struct {
	cfg          *session
	out, errw    io.Writer
	pd           *conn.PD
	qp           *conn.QP
	sw, rw       *waiter.Waiter // the send and the receive CQ
	csend, crecv *conn.MR
	buf          *conn.MR // data: maxsize + 4096 bytes, local write, remote read and write
	noacc        *conn.MR // --provoke access: the same bytes without remote write
	inv          []byte   // memory of the region a Send with Invalidate names

	seq     uint64
	dead    bool // the connection failed: nothing more is posted
	termRep bool // the TERMINATE line was printed
	sgl     [MaxSGE]conn.SGE
}

// Errors that end a session (PROTOCOL.md §6): the status they are counted
// with follows from their kind.
var (
	errTimeout  = errors.New("timed out")
	errProtocol = errors.New("protocol error")
)

// statusOf is the status a phase that ended the session is reported
// with.
func statusOf(err error) status {
	switch {
	case errors.Is(err, errTimeout):
		return stTimeout
	case errors.Is(err, errProtocol):
		return stProtocol
	}
	return stOpError
}

func newEndpoint(cfg *session) (*endpoint, error) {
	e := &endpoint{cfg: cfg, out: cfg.Out, errw: cfg.Err, pd: conn.NewPD()}
	scq, rcq := conn.NewCQ(32), conn.NewCQ(8)
	qp, err := e.pd.NewQP(scq, conn.QPCaps{SendDepth: 16, RecvDepth: 4, MaxSendSGE: cfg.SGEs,
		MaxRecvSGE: cfg.SGEs, RecvCQ: rcq})
	if err != nil {
		return nil, err
	}
	e.qp, e.sw, e.rw = qp, waiter.New(scq, qp), waiter.New(rcq, qp)
	// The data buffer has room for a message laid out in pieces with gaps
	// and guard bytes, and for a bounds-provoking address past its end.
	size := int(cfg.maxsize) + 4096
	acc := conn.LocalWrite | conn.RemoteWrite | conn.RemoteRead
	if e.buf, err = e.pd.Register(make([]byte, size), acc); err != nil {
		return nil, err
	}
	if e.csend, err = e.pd.Register(make([]byte, ctrlLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	if e.crecv, err = e.pd.Register(make([]byte, ctrlLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	if cfg.Provoke == ProvokeAccess {
		if e.noacc, err = e.pd.Register(e.buf.Bytes(), conn.LocalWrite|conn.RemoteRead); err != nil {
			return nil, err
		}
	}
	e.inv = make([]byte, invRegion)
	return e, nil
}

func (e *endpoint) role() string { return e.cfg.role() }

func (e *endpoint) printf(format string, a ...any) { fmt.Fprintf(e.out, format, a...) }

func (e *endpoint) errorf(format string, a ...any) {
	fmt.Fprintf(e.errw, "iwtest: "+format+"\n", a...)
}

func (e *endpoint) tracef(format string, a ...any) {
	if e.cfg.Verbose {
		e.errorf(format, a...)
	}
}

func (e *endpoint) nextID() uint64 {
	e.seq++
	return e.seq
}

// fail marks the connection dead and returns err, which ends the session.
func (e *endpoint) fail(what string, err error) error {
	e.dead = true
	e.errorf("%s: %v", what, err)
	return fmt.Errorf("%s: %w", what, err)
}

// post posts send-queue work; the work requests are all signalled.
func (e *endpoint) post(wrs ...conn.SendWR) error {
	for i := range wrs {
		wrs[i].Flags |= conn.Signaled
	}
	if n, err := e.qp.PostSendBatch(wrs); err != nil {
		return e.fail(fmt.Sprintf("posting %s", wrs[n].Op), err)
	}
	return nil
}

func (e *endpoint) postRecv(sgl []conn.SGE) error {
	if err := e.qp.PostRecv(conn.RecvWR{ID: e.nextID(), SGL: sgl}); err != nil {
		return e.fail("posting a receive", err)
	}
	return nil
}

func (e *endpoint) postCtrlRecv() error {
	return e.postRecv([]conn.SGE{e.crecv.SGE(0, ctrlLen)})
}

// wait returns the next completion w hands out, within the wait limit
// (-t). An unsuccessful completion, or the end of the connection, ends the
// session.
func (e *endpoint) wait(ctx context.Context, w *waiter.Waiter, what string) (conn.WorkCompletion, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	wc, err := w.Next(ctx)
	switch {
	case err == nil:
		return wc, nil
	case wc.Status != conn.WCSuccess:
		return wc, e.fail(what, fmt.Errorf("completion status %s: %w", wc.Status, err))
	case ctx.Err() != nil:
		e.errorf("%s: nothing completed within %v", what, e.cfg.Timeout)
		return wc, fmt.Errorf("%s: %w", what, errTimeout)
	}
	return wc, e.fail(what, err)
}

// waitSend waits for the completion of send-queue work request id; send
// completions arrive in posting order.
func (e *endpoint) waitSend(ctx context.Context, id uint64, what string) error {
	for {
		wc, err := e.wait(ctx, e.sw, what)
		if err != nil {
			return err
		}
		if wc.ID == id {
			return nil
		}
	}
}

func (e *endpoint) waitRecv(ctx context.Context, what string) (conn.WorkCompletion, error) {
	return e.wait(ctx, e.rw, what)
}

// sendCtrl sends one control message and waits for its completion.
func (e *endpoint) sendCtrl(ctx context.Context, m message) error {
	appendCtrl(e.csend.Bytes()[:0], &m)
	e.tracef("send %s test=%d dir=%d iter=%d size=%d status=%d", m.Type, m.Test, m.Dir, m.Iter, m.Size, m.Status)
	id := e.nextID()
	if err := e.post(conn.SendWR{ID: id, Op: conn.OpSend, SGL: []conn.SGE{e.csend.SGE(0, ctrlLen)}}); err != nil {
		return err
	}
	return e.waitSend(ctx, id, "control send")
}

// recvCtrl takes the control message the protocol says comes next (its
// receive was posted before). want 0 accepts any type; ph, if not nil, is
// the phase the message must echo.
func (e *endpoint) recvCtrl(ctx context.Context, want msgType, ph *phase) (message, error) {
	what := "next message"
	if want != 0 {
		what = want.String()
	}
	wc, err := e.waitRecv(ctx, what)
	if err != nil {
		return message{}, err
	}
	c, err := parseCtrl(e.crecv.Bytes()[:min(int(wc.ByteLen), ctrlLen)])
	if err != nil || wc.ByteLen != ctrlLen {
		e.errorf("received a %d-byte message that is not a control message", wc.ByteLen)
		return message{}, errProtocol
	}
	m := c.Fields()
	e.tracef("recv %s test=%d dir=%d iter=%d size=%d status=%d", m.Type, m.Test, m.Dir, m.Iter, m.Size, m.Status)
	if want != 0 && m.Type != want {
		e.errorf("expected %s, received %s", want, m.Type)
		return m, errProtocol
	}
	if ph != nil && !ph.echoes(&m) {
		e.errorf("%s does not echo the phase", m.Type)
		return m, errProtocol
	}
	return m, nil
}
