package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// iwtEndpoint is one side of an iwtest session: a queue pair with separate
// send and receive CQs, the control message buffers and the data buffer.
type iwtEndpoint struct {
	cfg          *iwtConfig
	out, errw    io.Writer
	pd           *conn.PD
	scq, rcq     *conn.CQ
	qp           *conn.QP
	csend, crecv *conn.MR
	buf          *conn.MR // data: maxsize + 4096 bytes, local write, remote read and write
	noacc        *conn.MR // --provoke access: the same bytes without remote write
	inv          []byte   // memory of the region a Send with Invalidate names

	seq     uint64
	dead    bool // the connection failed: nothing more is posted
	termRep bool // the TERMINATE line was printed
	wcs     [8]conn.WorkCompletion
	sgl     [iwtMaxSGE]conn.SGE
}

// Errors that end a session (PROTOCOL.md §6): the status they are counted
// with follows from their kind.
var (
	errIwtTimeout  = errors.New("timed out")
	errIwtProtocol = errors.New("protocol error")
)

// iwtStatusOf is the status a phase that ended the session is reported
// with.
func iwtStatusOf(err error) iwtStatus {
	switch {
	case errors.Is(err, errIwtTimeout):
		return iwtTimeout
	case errors.Is(err, errIwtProtocol):
		return iwtProtocol
	}
	return iwtOpError
}

func newIwtEndpoint(cfg *iwtConfig, out, errw io.Writer) (*iwtEndpoint, error) {
	e := &iwtEndpoint{cfg: cfg, out: out, errw: errw, pd: conn.NewPD()}
	e.scq = conn.NewCQ(32)
	e.rcq = conn.NewCQ(8)
	qp, err := e.pd.NewQP(e.scq, conn.QPCaps{SendDepth: 16, RecvDepth: 4, MaxSendSGE: cfg.nsge,
		MaxRecvSGE: cfg.nsge, RecvCQ: e.rcq})
	if err != nil {
		return nil, err
	}
	e.qp = qp
	// The data buffer has room for a message laid out in pieces with gaps
	// and guard bytes, and for a bounds-provoking address past its end.
	size := int(cfg.maxsize) + 4096
	acc := conn.LocalWrite | conn.RemoteWrite | conn.RemoteRead
	if e.buf, err = e.pd.Register(make([]byte, size), acc); err != nil {
		return nil, err
	}
	if e.csend, err = e.pd.Register(make([]byte, iwtCtrlLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	if e.crecv, err = e.pd.Register(make([]byte, iwtCtrlLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	if cfg.provoke == iwtProvokeAccess {
		if e.noacc, err = e.pd.Register(e.buf.Bytes(), conn.LocalWrite|conn.RemoteRead); err != nil {
			return nil, err
		}
	}
	e.inv = make([]byte, iwtInvRegion)
	return e, nil
}

func (e *iwtEndpoint) role() string {
	if e.cfg.server {
		return "server"
	}
	return "client"
}

func (e *iwtEndpoint) printf(format string, a ...any) { fmt.Fprintf(e.out, format, a...) }

func (e *iwtEndpoint) errorf(format string, a ...any) {
	fmt.Fprintf(e.errw, "iwtest: "+format+"\n", a...)
}

func (e *iwtEndpoint) tracef(format string, a ...any) {
	if e.cfg.verbose {
		e.errorf(format, a...)
	}
}

func (e *iwtEndpoint) nextID() uint64 {
	e.seq++
	return e.seq
}

// fail marks the connection dead and returns err, which ends the session.
func (e *iwtEndpoint) fail(what string, err error) error {
	e.dead = true
	e.errorf("%s: %v", what, err)
	return fmt.Errorf("%s: %w", what, err)
}

// post posts send-queue work; the work requests are all signalled.
func (e *iwtEndpoint) post(wrs ...conn.SendWR) error {
	for i := range wrs {
		wrs[i].Flags |= conn.Signaled
	}
	if n, err := e.qp.PostSendBatch(wrs); err != nil {
		return e.fail(fmt.Sprintf("posting %s", wrs[n].Op), err)
	}
	return nil
}

func (e *iwtEndpoint) postRecv(sgl []conn.SGE) error {
	if err := e.qp.PostRecv(conn.RecvWR{ID: e.nextID(), SGL: sgl}); err != nil {
		return e.fail("posting a receive", err)
	}
	return nil
}

func (e *iwtEndpoint) postCtrlRecv() error {
	return e.postRecv([]conn.SGE{e.crecv.SGE(0, iwtCtrlLen)})
}

// wait returns the next completion of cq, within the wait limit (-t). An
// unsuccessful completion ends the session. Every wait is for work this
// side posted, and a queue pair completes all of it when its connection
// ends (work that made it onto the wire successfully, the rest flushed),
// so the end of the connection needs no separate watch.
func (e *iwtEndpoint) wait(ctx context.Context, cq *conn.CQ, what string) (conn.WorkCompletion, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	for {
		if cq.Poll(e.wcs[:1]) == 1 {
			wc := e.wcs[0]
			if wc.Status != conn.WCSuccess {
				return wc, e.fail(what, fmt.Errorf("completion status %s: %w", wc.Status, wc.Err()))
			}
			return wc, nil
		}
		select {
		case <-cq.Ready():
		case <-ctx.Done():
			e.errorf("%s: nothing completed within %v", what, e.cfg.timeout)
			return conn.WorkCompletion{}, fmt.Errorf("%s: %w", what, errIwtTimeout)
		}
	}
}

// waitSend waits for the completion of send-queue work request id; send
// completions arrive in posting order.
func (e *iwtEndpoint) waitSend(ctx context.Context, id uint64, what string) error {
	for {
		wc, err := e.wait(ctx, e.scq, what)
		if err != nil {
			return err
		}
		if wc.ID == id {
			return nil
		}
	}
}

func (e *iwtEndpoint) waitRecv(ctx context.Context, what string) (conn.WorkCompletion, error) {
	return e.wait(ctx, e.rcq, what)
}

// sendCtrl sends one control message and waits for its completion.
func (e *iwtEndpoint) sendCtrl(ctx context.Context, m iwtMsg) error {
	appendIwtCtrl(e.csend.Bytes()[:0], &m)
	e.tracef("send %s test=%d dir=%d iter=%d size=%d status=%d", m.Type, m.Test, m.Dir, m.Iter, m.Size, m.Status)
	id := e.nextID()
	if err := e.post(conn.SendWR{ID: id, Op: conn.OpSend, SGL: []conn.SGE{e.csend.SGE(0, iwtCtrlLen)}}); err != nil {
		return err
	}
	return e.waitSend(ctx, id, "control send")
}

// recvCtrl takes the control message the protocol says comes next (its
// receive was posted before). want 0 accepts any type; ph, if not nil, is
// the phase the message must echo.
func (e *iwtEndpoint) recvCtrl(ctx context.Context, want iwtMsgType, ph *iwtPhase) (iwtMsg, error) {
	what := "next message"
	if want != 0 {
		what = want.String()
	}
	wc, err := e.waitRecv(ctx, what)
	if err != nil {
		return iwtMsg{}, err
	}
	c, err := parseIwtCtrl(e.crecv.Bytes()[:min(int(wc.ByteLen), iwtCtrlLen)])
	if err != nil || wc.ByteLen != iwtCtrlLen {
		e.errorf("received a %d-byte message that is not a control message", wc.ByteLen)
		return iwtMsg{}, errIwtProtocol
	}
	m := c.Fields()
	e.tracef("recv %s test=%d dir=%d iter=%d size=%d status=%d", m.Type, m.Test, m.Dir, m.Iter, m.Size, m.Status)
	if want != 0 && m.Type != want {
		e.errorf("expected %s, received %s", want, m.Type)
		return m, errIwtProtocol
	}
	if ph != nil && !ph.echoes(&m) {
		e.errorf("%s does not echo the phase", m.Type)
		return m, errIwtProtocol
	}
	return m, nil
}

// reportEnd prints how the connection ended, once it has: a Terminate
// received or sent (with the reading of its control field), and the
// cause.
func (e *iwtEndpoint) reportEnd() {
	if e.termRep {
		return
	}
	select {
	case <-e.qp.Done():
	default:
		return
	}
	e.termRep = true
	err := e.qp.Err()
	var te *rdmap.TerminateError
	if errors.As(err, &te) {
		e.printf("%s\n", iwtTerminateLine(e.role(), te))
	}
	event := "DISCONNECTED"
	switch {
	case te != nil:
		event = "TERMINATED"
	case errors.Is(err, conn.ErrConnectionLost):
		event = "CONNECTION_LOST"
	case errors.Is(err, conn.ErrQPClosed):
		event = "CLOSED"
	}
	e.printf("CONNECTION event=%s error=%q\n", event, fmt.Sprint(err))
}

// iwtTerminateLine describes a Terminate in one parseable line: where it
// came from, its code in the reading chosen, the layout of that reading
// (rfc, or siw for the little-endian bit-field order Linux siw sends) and
// the raw control field.
func iwtTerminateLine(role string, te *rdmap.TerminateError) string {
	origin, layout := "local", "rfc"
	m, d, r := te.Terminate.Flags()
	// What this side sends is in the RFC layout.
	w := rdmap.AppendTerminate(nil, &te.Terminate)[ddp.UntaggedHeaderLen:]
	control := fmt.Sprintf("%02x%02x%02x%02x", w[0], w[1], w[2], w[3])
	other := "-"
	if te.Remote {
		origin = "remote"
		if rt := te.Received; rt != nil {
			control = fmt.Sprintf("%02x%02x%02x%02x", rt.Control[0], rt.Control[1], rt.Control[2], rt.Control[3])
			rd := rt.Chosen()
			m, d, r = rd.M, rd.D, rd.R
			alt := rt.RFC
			if rt.Layout == rdmap.LayoutSIW {
				layout = "siw"
			} else {
				alt = rt.SIW
			}
			other = fmt.Sprintf("0x%04x", uint16(alt.Code))
		}
	}
	c := te.Code
	return fmt.Sprintf("TERMINATE role=%s origin=%s code=0x%04x layer=%d etype=%d ecode=0x%02x layout=%s control=%s m=%d d=%d r=%d other_reading=%s name=%q",
		role, origin, uint16(c), c.Layer(), c.EType(), c.ECode(), layout, control, iwtB2I(m), iwtB2I(d), iwtB2I(r), other, c.String())
}

func iwtB2I(b bool) int {
	if b {
		return 1
	}
	return 0
}
