package iwtest

import (
	"context"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/stag"
)

// The phases of PROTOCOL.md §5, one function per side. Each returns the
// phase's status and, if the session cannot go on, an error.

// sges is how many SGEs a test gathers from (the source) or scatters into
// (the receiver of a Send).
func (e *endpoint) sges(t Test, recvSide bool) int {
	switch {
	case t == TestSendSGE:
		return e.cfg.SGEs
	case t == TestWriteSGE && !recvSide:
		return e.cfg.SGEs
	}
	return 1
}

// sinkAdvert is the buffer this side advertises as an RDMA Write sink:
// with --provoke one the peer's Write must fail on (PROTOCOL.md §7).
func (e *endpoint) sinkAdvert(m *message, size uint32) {
	r := e.buf.Remote(0)
	m.Addr, m.STag, m.Len = r.TO, uint32(r.STag), size
	switch e.cfg.Provoke {
	case ProvokeAccess:
		m.STag = uint32(e.noacc.STag())
	case ProvokeBounds:
		m.Addr = e.buf.Remote(e.buf.Len() - int(size/2)).TO
	}
}

// provoked turns the outcome of waiting for DONE after advertising a bad
// sink into the phase's status: the connection must have failed.
func (e *endpoint) provoked(err error) (status, error) {
	if err != nil && e.dead {
		e.printf("TERMINATED role=%s provoke=%s\n", e.role(), e.cfg.Provoke)
		return stTerminated, err
	}
	return stNotTerminated, err
}

// postDataSend posts the data message of a send test (this side is the
// source); invSTag is the peer's region to invalidate for send_inv.
func (e *endpoint) postDataSend(ph *phase, invSTag uint32) (uint64, error) {
	l := makeLayout(ph.size, e.sges(ph.test, false))
	l.fill(e.buf.Bytes(), ph.seed(), false)
	wr := conn.SendWR{ID: e.nextID(), Op: conn.OpSend, SGL: l.sges(e.sgl[:], e.buf)}
	switch ph.test {
	case TestSendSE:
		wr.Flags |= conn.Solicited
	case TestSendInv:
		wr.Op, wr.InvSTag = conn.OpSendInv, stag.STag(invSTag)
	}
	return wr.ID, e.post(wr)
}

// writeAndDone posts the RDMA Write and right behind it DONE, without
// waiting in between: RDMAP places the Write before it delivers the Send
// that follows it on the stream, so DONE's arrival means the data is there.
func (e *endpoint) writeAndDone(ctx context.Context, ph *phase, dst *message) error {
	if dst.Len < ph.size {
		e.errorf("advertised sink of %d bytes is smaller than %d", dst.Len, ph.size)
		return errProtocol
	}
	l := makeLayout(ph.size, e.sges(ph.test, false))
	l.fill(e.buf.Bytes(), ph.seed(), false)
	done := ph.msg(msgDone, stOK)
	appendCtrl(e.csend.Bytes()[:0], &done)
	wid, did := e.nextID(), e.nextID()
	err := e.post(
		conn.SendWR{ID: wid, Op: conn.OpWrite, SGL: l.sges(e.sgl[:], e.buf),
			Remote: conn.RemoteAddr{STag: stag.STag(dst.STag), TO: dst.Addr}},
		conn.SendWR{ID: did, Op: conn.OpSend, SGL: []conn.SGE{e.csend.SGE(0, ctrlLen)}},
	)
	if err != nil {
		return err
	}
	if err := e.waitSend(ctx, wid, "RDMA Write"); err != nil {
		return err
	}
	return e.waitSend(ctx, did, "DONE")
}

// doRead reads size bytes from the advertised source into the local
// buffer with one SGE (siw's max_sge_rd is 1) and checks them.
func (e *endpoint) doRead(ctx context.Context, ph *phase, src *message) (status, error) {
	if src.Len < ph.size {
		e.errorf("advertised source of %d bytes is smaller than %d", src.Len, ph.size)
		return stProtocol, errProtocol
	}
	l := makeLayout(ph.size, 1)
	l.fill(e.buf.Bytes(), ph.seed(), true)
	id := e.nextID()
	err := e.post(conn.SendWR{ID: id, Op: conn.OpRead, SGL: []conn.SGE{e.buf.SGE(0, int(ph.size))},
		Remote: conn.RemoteAddr{STag: stag.STag(src.STag), TO: src.Addr}})
	if err == nil {
		err = e.waitSend(ctx, id, "RDMA Read")
	}
	if err != nil {
		return statusOf(err), err
	}
	return e.checkSink(&l, ph), nil
}

func (e *endpoint) checkSink(l *layout, ph *phase) status {
	if err := l.check(e.buf.Bytes(), ph.seed()); err != nil {
		e.tracef("%v", err)
		return stMismatch
	}
	return stOK
}

// armDataRecv prepares this side for the data message of a send test:
// the sink holds the complement of the pattern, and the receive is
// posted before this side sends the message that lets the peer send.
func (e *endpoint) armDataRecv(ph *phase) (layout, error) {
	l := makeLayout(ph.size, e.sges(ph.test, true))
	l.fill(e.buf.Bytes(), ph.seed(), true)
	return l, e.postRecv(l.sges(e.sgl[:], e.buf))
}

// checkDataRecv is the receive side of a send test. This side sees the
// RDMAP opcode of the Send, so it checks the Solicited Event bit (send_se
// has it, the others do not) and, for send_inv, that exactly inv was
// invalidated.
func (e *endpoint) checkDataRecv(ctx context.Context, ph *phase, l *layout, inv *conn.MR) (status, error) {
	wc, err := e.waitRecv(ctx, "data Send")
	if err != nil {
		return statusOf(err), err
	}
	st := stOK
	solicited := wc.Flags&conn.WCSolicited != 0
	if ph.test == TestSendSE {
		e.printf("SOLICITED role=%s iter=%d size=%d event=%s\n", e.role(), ph.iter, ph.size, negotiated.YesNo(solicited))
	}
	if solicited != (ph.test == TestSendSE) {
		e.errorf("data Send: Solicited Event %t, want %t", solicited, ph.test == TestSendSE)
		st = stSolicited
	}
	if wc.Op != conn.WCRecv || wc.ByteLen != ph.size {
		e.errorf("data Send: %s, %d bytes, want %d", wc.Op, wc.ByteLen, ph.size)
		return stLength, nil
	}
	invalidated := wc.Flags&conn.WCWithInv != 0
	if inv != nil {
		want := uint32(inv.STag())
		e.printf("INVALIDATE role=%s iter=%d size=%d stag=0x%08x reported=%s\n", e.role(), ph.iter, ph.size, want, negotiated.YesNo(invalidated))
		if !invalidated || wc.InvSTag != want {
			e.errorf("Send with Invalidate: invalidated %t STag 0x%08x, want 0x%08x", invalidated, wc.InvSTag, want)
			st = stInvalidate
		}
	} else if invalidated {
		e.errorf("unexpected invalidation of STag 0x%08x", wc.InvSTag)
		st = stInvalidate
	}
	if d := e.checkSink(l, ph); d != stOK {
		return d, nil
	}
	return st, nil
}

// regInv registers a fresh region for a Send with Invalidate to name.
func (e *endpoint) regInv() (*conn.MR, error) {
	mr, err := e.pd.Register(e.inv, conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	if err != nil {
		return nil, e.fail("registering the invalidation region", err)
	}
	return mr, nil
}

func (e *endpoint) dropInv(mr *conn.MR) {
	if mr != nil {
		if err := mr.Deregister(); err != nil {
			e.errorf("deregistering the invalidation region: %v", err)
		}
	}
}

// clientPhase runs one phase on the client.
func (e *endpoint) clientPhase(ctx context.Context, ph *phase) (status, error) {
	begin := ph.msg(msgBegin, stOK)
	fatal := func(err error) (status, error) { return statusOf(err), err }

	if ph.dir == 0 { // the client is the data source
		if ph.test == TestRead {
			l := makeLayout(ph.size, 1)
			l.fill(e.buf.Bytes(), ph.seed(), false)
			r := e.buf.Remote(0)
			begin.Addr, begin.STag, begin.Len = r.TO, uint32(r.STag), ph.size
			if err := e.postCtrlRecv(); err != nil {
				return fatal(err)
			}
			if err := e.sendCtrl(ctx, begin); err != nil {
				return fatal(err)
			}
			m, err := e.recvCtrl(ctx, msgAck, ph)
			if err != nil {
				return fatal(err)
			}
			return status(m.Status), nil
		}
		if err := e.postCtrlRecv(); err != nil {
			return fatal(err)
		}
		if err := e.sendCtrl(ctx, begin); err != nil {
			return fatal(err)
		}
		want := msgBuf
		if ph.test.isSend() && ph.test != TestSendInv {
			want = msgGo
		}
		m, err := e.recvCtrl(ctx, want, ph)
		if err != nil {
			return fatal(err)
		}
		if err := e.postCtrlRecv(); err != nil {
			return fatal(err)
		}
		if ph.test.isWrite() {
			if err := e.writeAndDone(ctx, ph, &m); err != nil {
				return fatal(err)
			}
		} else {
			id, err := e.postDataSend(ph, m.STag)
			if err == nil {
				err = e.waitSend(ctx, id, "data Send")
			}
			if err != nil {
				return fatal(err)
			}
		}
		m, err = e.recvCtrl(ctx, msgAck, ph)
		if err != nil {
			return fatal(err)
		}
		return status(m.Status), nil
	}

	// The server is the data source.
	var st status
	switch {
	case ph.test.isWrite():
		l := makeLayout(ph.size, 1)
		l.fill(e.buf.Bytes(), ph.seed(), true)
		e.sinkAdvert(&begin, ph.size)
		err := e.postCtrlRecv()
		if err == nil {
			err = e.sendCtrl(ctx, begin)
		}
		var m message
		if err == nil {
			m, err = e.recvCtrl(ctx, msgDone, ph)
		}
		if e.cfg.Provoke != 0 {
			// The peer may write (and this side fail) before the
			// completion of the advertisement is seen.
			return e.provoked(err)
		}
		if err != nil {
			return fatal(err)
		}
		st = status(m.Status)
		if st == stOK {
			st = e.checkSink(&l, ph)
		}
	case ph.test == TestRead:
		if err := e.postCtrlRecv(); err != nil {
			return fatal(err)
		}
		if err := e.sendCtrl(ctx, begin); err != nil {
			return fatal(err)
		}
		m, err := e.recvCtrl(ctx, msgBuf, ph)
		if err != nil {
			return fatal(err)
		}
		if st, err = e.doRead(ctx, ph, &m); err != nil {
			return st, err
		}
	default: // sends
		var err error
		if st, err = e.sinkOfSend(ctx, ph, begin); err != nil {
			return st, err
		}
	}
	if err := e.postCtrlRecv(); err != nil {
		return fatal(err)
	}
	if err := e.sendCtrl(ctx, ph.msg(msgAck, st)); err != nil {
		return fatal(err)
	}
	m, err := e.recvCtrl(ctx, msgAck, ph)
	if err != nil {
		return fatal(err)
	}
	return status(m.Status), nil
}

// serverPhase runs one phase on the server; m1 is the BEGIN that opened it.
func (e *endpoint) serverPhase(ctx context.Context, ph *phase, m1 *message) (status, error) {
	fatal := func(err error) (status, error) { return statusOf(err), err }

	if ph.dir == 0 { // the client is the data source
		var st status
		switch {
		case ph.test == TestRead:
			var err error
			if st, err = e.doRead(ctx, ph, m1); err != nil {
				return st, err
			}
		case ph.test.isWrite():
			l := makeLayout(ph.size, 1)
			l.fill(e.buf.Bytes(), ph.seed(), true)
			out := ph.msg(msgBuf, stOK)
			e.sinkAdvert(&out, ph.size)
			err := e.postCtrlRecv()
			if err == nil {
				err = e.sendCtrl(ctx, out)
			}
			if err == nil {
				_, err = e.recvCtrl(ctx, msgDone, ph)
			}
			if e.cfg.Provoke != 0 {
				return e.provoked(err)
			}
			if err != nil {
				return fatal(err)
			}
			st = e.checkSink(&l, ph)
		default: // sends
			out := ph.msg(msgGo, stOK)
			if ph.test == TestSendInv {
				out.Type = msgBuf // GO becomes BUF, carrying the region to invalidate
			}
			var err error
			if st, err = e.sinkOfSend(ctx, ph, out); err != nil {
				return st, err
			}
		}
		if err := e.postCtrlRecv(); err != nil {
			return fatal(err)
		}
		if err := e.sendCtrl(ctx, ph.msg(msgAck, st)); err != nil {
			return fatal(err)
		}
		return st, nil
	}

	// The server is the data source.
	if err := e.postCtrlRecv(); err != nil {
		return fatal(err)
	}
	switch {
	case ph.test.isWrite():
		if err := e.writeAndDone(ctx, ph, m1); err != nil {
			return fatal(err)
		}
	case ph.test == TestRead:
		l := makeLayout(ph.size, 1)
		l.fill(e.buf.Bytes(), ph.seed(), false)
		out := ph.msg(msgBuf, stOK)
		r := e.buf.Remote(0)
		out.Addr, out.STag, out.Len = r.TO, uint32(r.STag), ph.size
		if err := e.sendCtrl(ctx, out); err != nil {
			return fatal(err)
		}
	default:
		id, err := e.postDataSend(ph, m1.STag)
		if err == nil {
			err = e.waitSend(ctx, id, "data Send")
		}
		if err != nil {
			return fatal(err)
		}
	}
	m, err := e.recvCtrl(ctx, msgAck, ph)
	if err != nil {
		return fatal(err)
	}
	st := status(m.Status)
	if err := e.postCtrlRecv(); err != nil {
		return fatal(err)
	}
	if err := e.sendCtrl(ctx, ph.msg(msgAck, st)); err != nil {
		return fatal(err)
	}
	return st, nil
}

// sinkOfSend is the receiving side of a send phase: for send_inv it
// registers the region the peer is to invalidate and advertises it in msg;
// it posts the data receive, sends msg (the message that lets the peer
// send) and checks the data message that arrives.
func (e *endpoint) sinkOfSend(ctx context.Context, ph *phase, msg message) (status, error) {
	var inv *conn.MR
	if ph.test == TestSendInv {
		var err error
		if inv, err = e.regInv(); err != nil {
			return statusOf(err), err
		}
		r := inv.Remote(0)
		msg.Addr, msg.STag, msg.Len = r.TO, uint32(r.STag), invRegion
	}
	defer e.dropInv(inv)
	l, err := e.armDataRecv(ph)
	if err == nil {
		err = e.sendCtrl(ctx, msg)
	}
	if err != nil {
		return statusOf(err), err
	}
	return e.checkDataRecv(ctx, ph, &l, inv)
}
