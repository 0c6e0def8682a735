package conn

import (
	"reflect"
	"runtime"
)

type pendingWC struct {
	cq *CQ
	wc WorkCompletion
}

// completeLocked delivers a completion to cq: into its ring, or, for a CQ
// with a handler, into the queue pair's pending list, which deliver hands
// to the handler once the goroutine holds no lock. Called with QP.mu held.
func (qp *QP) completeLocked(cq *CQ, wc *WorkCompletion) {
	if cq.handler == nil {
		cq.push(wc)
		return
	}
	qp.pend = append(qp.pend, pendingWC{cq: cq, wc: *wc})
}

// deliver calls the handlers for pending completions, one goroutine at a
// time per queue pair (so in order). It must be called with no lock of the
// library held (no QP.mu, no receive or transmit token), and every path
// that may complete work calls it once it has released them. A goroutine
// that finds another delivering leaves its completions to that one, which
// loops until none is pending.
func (qp *QP) deliver() {
	if !qp.handlers {
		return
	}
	qp.mu.Lock()
	if qp.delivering {
		qp.mu.Unlock()
		return
	}
	qp.delivering = true
	for len(qp.pend) > 0 {
		batch := qp.pend
		qp.pend = qp.spare[:0]
		qp.mu.Unlock()
		for i := range batch {
			p := &batch[i]
			p.cq.unreserve(1)
			p.cq.handler(&p.wc)
			*p = pendingWC{}
		}
		qp.mu.Lock()
		qp.spare = batch[:0]
	}
	qp.delivering = false
	qp.deliverIdle.Broadcast()
	qp.mu.Unlock()
}

// deliverAll hands over every pending completion before it returns, also
// those another goroutine is delivering at the moment — unless the caller
// is itself inside a completion handler, which must not wait for its own
// return: then the goroutine running that handler hands them over later.
func (qp *QP) deliverAll() {
	if !qp.handlers {
		return
	}
	if insideDeliver() {
		qp.deliver()
		return
	}
	qp.mu.Lock()
	for qp.delivering {
		qp.deliverIdle.Wait()
	}
	qp.mu.Unlock()
	qp.deliver()
}

// insideDeliver reports whether the calling goroutine is running a
// completion handler (its stack goes through deliver). Only Close and
// Abort ask, so walking the stack costs nothing that matters.
func insideDeliver() bool {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function == deliverName {
			return true
		}
		if !more {
			return false
		}
	}
}

var deliverName = runtime.FuncForPC(reflect.ValueOf((*QP).deliver).Pointer()).Name()

// completeSQLocked completes finished send work requests, in posting
// order, and releases their memory references.
func (qp *QP) completeSQLocked() {
	qp.sq.popDone(func(w *sendWQE, refs []sgeRef) { qp.finishSendLocked(w, refs) })
	qp.checkDrainedLocked()
}

func (qp *QP) finishSendLocked(w *sendWQE, refs []sgeRef) {
	releaseRefs(refs)
	if w.status == WCSuccess && w.flags&Signaled == 0 {
		qp.scq.unreserve(1)
		return
	}
	wc := WorkCompletion{
		ID:     w.id,
		QPN:    qp.qpn,
		Status: w.status,
		Op:     w.wc,
		Flags:  w.wcFlags,
		err:    w.err,
	}
	if w.status == WCSuccess {
		wc.ByteLen = uint32(w.length)
	}
	qp.completeLocked(qp.scq, &wc)
}

// completeRecvLocked completes the receive the current Send message filled.
func (qp *QP) completeRecvLocked(p *rxPending) error {
	w, err := qp.recv.pop()
	if err != nil {
		return err
	}
	wc := WorkCompletion{ID: w.id, QPN: qp.qpn, Op: WCRecv, Flags: p.flags, ByteLen: uint32(p.msgLen), InvSTag: p.invSTag, Imm: p.imm}
	qp.completeLocked(qp.rcq, &wc)
	return nil
}

// flushInErrorLocked completes every outstanding work request "flushed in
// error", as verbs calls it (status WCWRFlushErr, or the status already
// recorded for it), once the engine has stopped. Not to be confused with
// the Flush extension (flush.go), which persists.
func (qp *QP) flushInErrorLocked(cause error) {
	qp.sq.flushInError(WCWRFlushErr, cause, func(w *sendWQE, refs []sgeRef) { qp.finishSendLocked(w, refs) })
	qp.recv.flushInError(func(w *recvWQE, _ []sgeRef) {
		qp.completeLocked(qp.rcq, &WorkCompletion{ID: w.id, QPN: qp.qpn, Status: WCWRFlushErr, Op: WCRecv, err: cause})
	})
}

// checkDrainedLocked tells a graceful Close that everything posted has
// completed and every Read Request of the peer has been answered. It is
// called wherever either makes progress.
func (qp *QP) checkDrainedLocked() {
	if e := qp.eng; e != nil && qp.state == stateClosing && qp.sq.empty() && e.irq.empty() {
		e.signalDrained()
	}
}
