package conn

import (
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// transmitter is the goroutine that frames and sends: send-queue messages,
// Read Responses and, at the end, a Terminate. It exits when the
// connection has failed or closed, then waits for the receiver and flushes
// outstanding work.
func (e *engine) transmitter() {
	qp := e.qp
	defer func() {
		e.c.Close()
		<-e.rxDone
		close(e.txDone)
		e.finish()
	}()
	for {
		if !e.transmit() {
			return
		}
		<-qp.wake
	}
}

// transmit sends everything that is ready. It returns false when the
// connection is over (after sending a pending Terminate).
func (e *engine) transmit() bool {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	for {
		more, alive := e.fill()
		if e.w.Pending() > 0 {
			if err := e.w.Flush(); err != nil {
				e.fail(connectionLost(err), nil)
				return false
			}
			e.afterFlush()
		}
		if !alive {
			return false
		}
		if !more {
			return true
		}
	}
}

// transmitNow is the non-blocking form of transmit, for goroutines that
// must not wait on the network (posting, the receiver): it frames one
// batch and writes what the socket takes now; whatever remains is left to
// the transmitter goroutine. The caller holds txMu.
func (e *engine) transmitNow() {
	if e.dead.Load() {
		e.qp.kick() // the transmitter sends the Terminate and cleans up
		return
	}
	more, alive := e.fill()
	if e.w.Pending() > 0 {
		done, err := e.w.TryFlush()
		if err != nil {
			e.fail(connectionLost(err), nil)
			return
		}
		if done {
			e.afterFlush()
		} else {
			more = true
		}
	}
	if more || !alive {
		e.qp.kick()
	}
}

// sendSoon is send for the receiver: it answers Read Requests and unblocks
// queued work without a hand-off when it can.
func (e *engine) sendSoon() {
	if e.txMu.TryLock() {
		e.transmitNow()
		e.txMu.Unlock()
		return
	}
	e.qp.kick()
}

// fill frames FPDUs into the writer until the batch is full (more=true) or
// nothing is ready (more=false). alive=false means the connection ended.
func (e *engine) fill() (more, alive bool) {
	for e.w.Pending() < maxBatchFPDUs && e.w.Buffered() < maxBatchBytes {
		if e.dead.Load() {
			e.cur = txNone // the rest of the message is not sent
		}
		if e.cur == txNone {
			ok, alive := e.next()
			if !alive {
				return false, false
			}
			if !ok {
				return false, true
			}
			if e.cur == txNone { // work done without framing (local invalidate)
				continue
			}
		}
		e.frameSegment()
	}
	return true, true
}

// next picks the next message to send. It returns ok=false when nothing
// can be sent now, alive=false when the connection has ended (in which
// case a pending Terminate has been sent).
func (e *engine) next() (ok, alive bool) {
	qp := e.qp
	qp.mu.Lock()
	if qp.state >= stateError {
		term := e.term
		e.term = nil
		qp.mu.Unlock()
		if term != nil {
			e.sendTerminate(term)
		}
		return false, false
	}
	if !e.txOpen {
		qp.mu.Unlock()
		return false, true
	}
	irqReady := e.irqNext != e.irqTail
	sqReady := qp.sqNext != qp.sqTail && e.sqRunnableLocked()
	switch {
	case irqReady && (e.preferIRQ || !sqReady):
		e.startReadResponseLocked()
		e.preferIRQ = false
	case sqReady:
		e.startSQLocked()
		e.preferIRQ = true
	default:
		qp.checkDrainedLocked()
		qp.mu.Unlock()
		return false, true
	}
	qp.mu.Unlock()
	qp.deliver() // a local invalidate or a refused message may have completed
	return true, true
}

// sqRunnableLocked reports whether the next send-queue work request may
// start: a Read needs an ORD credit, a fenced request waits for every
// earlier Read to complete.
func (e *engine) sqRunnableLocked() bool {
	qp := e.qp
	w := &qp.sq[slot(qp.sqNext, len(qp.sq))]
	outstanding := int(e.orqTail - e.orqHead)
	if w.flags&Fence != 0 && outstanding > 0 {
		return false
	}
	if w.op == OpRead && outstanding >= e.ordLimit {
		return false
	}
	return true
}

func (e *engine) startSQLocked() {
	qp := e.qp
	ctr := qp.sqNext
	i := slot(ctr, len(qp.sq))
	w := &qp.sq[i]
	qp.sqNext++
	refs := qp.sqSGE[i*qp.caps.MaxSendSGE : i*qp.caps.MaxSendSGE+w.nsge]
	e.pieces = e.pieces[:0]
	for _, r := range refs {
		e.pieces = append(e.pieces, r.buf)
	}
	var err error
	switch w.op {
	case OpSend, OpSendInv, OpSendSE, OpSendSEInv:
		msn := e.sendMSN
		e.sendMSN++
		err = rdmap.StartSend(&e.seg, sendOpcode(w.op), e.pieces, e.mulpdu, uint32(w.invSTag), msn)
	case OpWrite:
		err = rdmap.StartWrite(&e.seg, e.pieces, e.mulpdu, uint32(w.remote.STag), w.remote.TO)
	case OpRead:
		e.startReadRequestLocked(ctr, w, refs)
		return
	case OpLocalInv:
		if f := qp.pd.pd.Invalidate(w.invSTag); f != stag.OK {
			w.status = WCLocProtErr
			w.err = f
		}
		w.done = true
		qp.completeSQLocked()
		return
	}
	if err != nil {
		// The message cannot be segmented (a Write whose TO would wrap):
		// a local error of this work request only.
		w.status = WCLocQPOpErr
		w.err = err
		w.done = true
		qp.completeSQLocked()
		return
	}
	e.cur, e.curCtr = txSQ, ctr
}

// startReadRequestLocked frames an RDMA Read Request: one FPDU, no payload.
// The response is placed into the work request's SGL; the sink STag and TO
// carried in the request are those of its first SGE, and the receiver
// matches the response to the request by order, STag and TO.
func (e *engine) startReadRequestLocked(ctr uint32, w *sendWQE, refs []sgeRef) {
	var sink RemoteAddr
	if len(refs) > 0 {
		r := refs[0].region
		sink = RemoteAddr{STag: r.STag(), TO: r.TO(refs[0].off)}
	}
	ent := orqEntry{sqCtr: ctr, sinkSTag: uint32(sink.STag), sinkTO: sink.TO, size: uint32(w.length)}
	e.orq[slot(e.orqTail, len(e.orq))] = ent
	e.orqTail++
	msn := e.rreqMSN
	e.rreqMSN++
	hdr := rdmap.AppendReadRequest(e.hdr[:0], msn, rdmap.ReadRequestFields{
		SinkSTag: ent.sinkSTag,
		SinkTO:   ent.sinkTO,
		Size:     ent.size,
		SrcSTag:  uint32(w.remote.STag),
		SrcTO:    w.remote.TO,
	})
	e.queueSingle(hdr)
}

func (e *engine) startReadResponseLocked() {
	ent := &e.irq[slot(e.irqNext, len(e.irq))]
	e.pieces = append(e.pieces[:0], ent.src)
	if err := rdmap.StartReadResponse(&e.seg, e.pieces, e.mulpdu, ent.sinkSTag, ent.sinkTO); err != nil {
		// The sink TO would wrap: the request was accepted, so this is a
		// catastrophic error of the stream.
		e.qp.mu.Unlock()
		e.failTerminate(rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil))
		e.qp.mu.Lock()
		return
	}
	e.cur, e.curCtr = txIRQ, e.irqNext
	e.irqNext++
}

// queueSingle frames a one-FPDU message with no payload.
func (e *engine) queueSingle(hdr []byte) {
	if err := e.w.Begin(hdr); err == nil {
		err = e.w.End()
	}
}

// frameSegment frames the next segment of the current message.
func (e *engine) frameSegment() {
	seg, ok := e.seg.Next(e.hdr[:0], e.segPayload[:0])
	if !ok {
		e.cur = txNone
		return
	}
	e.w.Begin(seg.Header)
	for _, p := range seg.Payload {
		e.w.Payload(p)
	}
	e.w.End()
	if seg.Last {
		if e.cur == txIRQ {
			// The IRD slot is free as soon as the response's last segment
			// is on its way: the requester may reuse the credit the moment
			// it has the response, possibly before our writev returns.
			e.qp.mu.Lock()
			e.irq[slot(e.curCtr, len(e.irq))] = irqEntry{}
			e.irqHead = e.curCtr + 1
			e.qp.checkDrainedLocked()
			e.qp.mu.Unlock()
		} else {
			e.sent = append(e.sent, e.curCtr) // a send-queue message
		}
		e.cur = txNone
	}
}

// afterFlush completes what the flush finished sending: Sends and Writes
// complete (in send-queue order), answered Read Requests free their IRD
// slots.
func (e *engine) afterFlush() {
	if len(e.sent) == 0 {
		return
	}
	qp := e.qp
	qp.mu.Lock()
	for _, ctr := range e.sent {
		qp.sq[slot(ctr, len(qp.sq))].done = true
	}
	qp.completeSQLocked()
	qp.mu.Unlock()
	e.sent = e.sent[:0]
	qp.deliver()
}

// sendTerminate sends a Terminate as the last FPDU of the stream.
func (e *engine) sendTerminate(t *rdmap.Terminate) {
	e.c.SetWriteDeadline(time.Now().Add(terminateTimeout))
	hdr := rdmap.AppendTerminate(e.hdr[:0], t)
	if e.w.Begin(hdr) == nil && e.w.End() == nil {
		e.w.Flush()
	}
}

func sendOpcode(op Op) rdmap.Opcode {
	switch op {
	case OpSendInv:
		return rdmap.OpSendInvalidate
	case OpSendSE:
		return rdmap.OpSendSE
	case OpSendSEInv:
		return rdmap.OpSendSEInvalidate
	}
	return rdmap.OpSend
}
