package conn

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// RFC 7306 between iwarp-go peers (docs/rfc-notes/rfc7306.md): Atomic
// Requests on QN 1 with the Read Requests (their MSNs, IRD and ORD),
// Atomic Responses on QN 3, Immediate Data on QN 0 consuming a receive.
//
// Atomicity: the target word is changed with sync/atomic (a load and a
// compare-and-swap loop), so an atomic is atomic against every other
// atomic on that word from any queue pair of the process, and against
// MR.LoadUint64. An RDMA Write into the same word is not an atomic: an
// aligned 8-byte Write is stored with one 64-bit store and is seen whole,
// before or after the atomic (which then retries from its value); a longer
// Write is copied byte-wise, and an atomic racing with it may read, and
// build on, a mix of old and new bytes.

// ErrRFC7306Unsupported is the error of an atomic or immediate-data work
// request toward a peer that did not negotiate RFC 7306 (any peer that is
// not iwarp-go; Linux siw implements none of it).
var ErrRFC7306Unsupported = errors.New("iwarp: the peer does not accept RFC 7306 atomics and immediate data")

// PeerAtomics reports whether the connected peer accepts RFC 7306 atomics
// and immediate data (both sides declared the extension); false before
// connecting.
func (qp *QP) PeerAtomics() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.eng != nil && qp.eng.ext&rdmap.ExtRFC7306 != 0
}

// negotiated completes w in error if its operation's extension is not in
// use on the connection (a work request posted before connecting), and
// reports whether it may go on.
func (e *engine) negotiated(op *sendOpInfo, w *sendWQE) bool {
	if op.ext == 0 || e.ext&op.ext != 0 {
		return true
	}
	err := ErrRFC7306Unsupported
	if op.ext == rdmap.ExtFlush {
		err = ErrFlushUnsupported
	}
	w.status, w.err, w.done = WCLocQPOpErr, err, true
	e.qp.completeSQLocked()
	return false
}

// startAtomic frames an Atomic Request: one FPDU, QN 1, the next MSN of
// queue 1, an ORD credit (RFC 7306 §5.2.1).
func (e *engine) startAtomic(op *sendOpInfo, ctr uint32, w *sendWQE, _ []sgeRef) {
	if !e.negotiated(op, w) {
		return
	}
	tx := &e.tx
	msn := tx.rreqMSN
	tx.rreqMSN++
	tx.reqID++
	w.msn = msn
	e.orq.push(orqEntry{sqCtr: ctr, msn: msn, kind: reqAtomic, reqID: tx.reqID})
	aop, args := rdmap.AtomicFetchAdd, w.atomic
	if w.op == OpCmpSwap {
		aop = rdmap.AtomicCmpSwap
	} else {
		// RFC 7306 §5.1.1: a FetchAdd's Compare Data is zero and its
		// Compare Mask all ones on transmit (ignored on receipt).
		args.Compare, args.CompareMask = 0, ^uint64(0)
	}
	hdr := rdmap.AppendAtomicRequest(tx.hdr[:0], msn, rdmap.AtomicRequestFields{
		Op: aop, ID: tx.reqID, STag: uint32(w.remote.STag), TO: w.remote.TO, Args: args,
	})
	e.qp.stats.countTx(rdmap.OpAtomicRequest, len(hdr))
	if err := tx.w.WriteFPDU(hdr); err != nil {
		w.status, w.err, w.done = WCLocQPOpErr, fmt.Errorf("iwarp: framing an Atomic Request: %w", err), true
		e.qp.completeSQLocked()
	}
}

// startSendImm frames an Immediate Data message, which completes like a
// Send once written.
func (e *engine) startSendImm(op *sendOpInfo, ctr uint32, w *sendWQE, _ []sgeRef) {
	if !e.negotiated(op, w) {
		return
	}
	rop := rdmap.OpImmediate
	if w.flags&Solicited != 0 {
		rop = rdmap.OpImmediateSE
	}
	w.msn = e.tx.sendMSN
	if err := e.frameImmediate(rop, w.imm); err != nil {
		w.status, w.err, w.done = WCLocQPOpErr, err, true
		e.qp.completeSQLocked()
		return
	}
	e.tx.sent = append(e.tx.sent, ctr)
}

// frameImmediate frames an Immediate Data message with the next Send MSN
// (QN 0 is one sequence for Sends and Immediate Data).
func (e *engine) frameImmediate(op rdmap.Opcode, v uint64) error {
	tx := &e.tx
	hdr := rdmap.AppendImmediate(tx.hdr[:0], op, tx.sendMSN, v)
	tx.sendMSN++
	e.qp.stats.countTx(op, len(hdr))
	return tx.w.WriteFPDU(hdr)
}

// rxImmediate takes an Immediate Data message: it consumes the next
// receive (none posted: SendNoBuffer, as for a Send) and completes it with
// the value once the CRC checks. Nothing is placed into the receive's
// buffer; its 8 bytes are the DDP payload of the message.
func (e *engine) rxImmediate(h *rdmap.Header, n int) error {
	w, _, err := e.nextReceive(h, n)
	if err != nil {
		return err
	}
	bufLen := ddp.NoBuffer
	if w != nil {
		bufLen = rdmap.ImmediateDataLen
	}
	if _, err := e.rx.uq.Receive(h.Untagged(), n, bufLen); err != nil {
		return err
	}
	v, _ := h.Immediate()
	e.rx.pend = rxPending{action: rxRecvDone, flags: WCWithImm, imm: v}
	if h.Op.Solicited() {
		e.rx.pend.flags |= WCSolicited
	}
	return nil
}

// rxAtomicRequest validates a peer's Atomic Request; once its CRC is
// verified it is carried out and its response joins the inbound queue
// behind the Read Requests before it (RFC 7306 §5.2.1: responses in
// request order, the IRD shared).
//
// It is carried out in stream order, when it is received: after every
// Write before it is placed, and before a Flush Request after it is
// handed to the region's hooks, so that the flush persists it. A Read
// Request received before it whose response is still queued (not yet
// framed) reads the region when framed, and may so see the atomic's
// result (docs/rfc-notes/rfc7306.md, "Ordering").
func (e *engine) rxAtomicRequest(h *rdmap.Header, n int) error {
	rx := &e.rx
	hdr := h.Bytes()
	if _, err := rx.uq.Receive(h.Untagged(), n, rdmap.AtomicRequestBodyLen); err != nil {
		return err
	}
	ar := h.AtomicRequest()
	qp := e.qp
	qp.mu.Lock()
	full := e.irq.full()
	qp.mu.Unlock()
	if full {
		return rdmap.NewError(rdmap.AtomicIRDExceeded, hdr, n, nil)
	}
	if ar.TO()%8 != 0 {
		return rdmap.NewError(rdmap.AtomicMisaligned, hdr, n, nil)
	}
	r, word, f := qp.pd.pd.LookupRemoteFrom(stag.STag(ar.STag()), ar.TO(), 8, stag.RemoteAtomic, qp)
	if f != stag.OK {
		return rdmap.NewError(conditionFor(useAtomicTarget, f), hdr, n, nil)
	}
	if !aligned8(word) {
		// An aligned TO in a region whose memory is not 8-aligned.
		r.ReleaseRemote()
		return rdmap.NewError(rdmap.AtomicMisaligned, hdr, n, nil)
	}
	ent := irqEntry{kind: reqAtomic, region: r, src: word, srcOff: int(ar.TO() - r.Base()), reqID: ar.ID()}
	copy(ent.req[:], hdr)
	rx.pend = rxPending{action: rxQueueAtomic, irq: ent}
	rx.pend.atomic = ar.Fields()
	return e.holdRequest(r, reqAtomic, hdr, n)
}

// commitQueueAtomic carries out a verified Atomic Request and queues its
// response. The region's hooks are told of the 8 bytes changed, as of a
// Write's (a pmemsink region counts them dirty, so that a later flush
// persists them).
//
// A queue pair that has left the connected states (a failure, or a Close
// past its drain) carries out nothing: its response could never be sent,
// and a requester told of the failure must be able to count on the word
// being untouched. The state is checked and the word changed under QP.mu,
// so that the failure is ordered wholly before or wholly after the atomic.
// A graceful Close still draining (stateClosing) answers the peer's
// requests, atomics included, as it answers its Read Requests.
func (e *engine) commitQueueAtomic(*rdmap.Header, int) error {
	p := &e.rx.pend
	ent := p.irq
	p.irq = irqEntry{}
	x := extOf(ent.region)
	var err error
	qp := e.qp
	qp.mu.Lock()
	live := qp.state < stateError
	switch {
	case !live:
	case x != nil && x.mayFault:
		err = guardFault(x, func() error { ent.orig = e.applyAtomic(x, ent.src, &p.atomic); return nil })
	default:
		ent.orig = e.applyAtomic(x, ent.src, &p.atomic)
	}
	qp.mu.Unlock()
	if live && err == nil && x != nil && x.hooks != nil {
		x.hooks.Placed(e.qp, ent.srcOff, 8)
	}
	// Nothing reads the region after this: the response carries a value.
	e.endPlacing(ent.region)
	ent.region.ReleaseRemote()
	ent.region, ent.src = nil, nil
	if err != nil || !live {
		return err
	}
	ent.state = irqReady
	if _, _, ok := e.queueInbound(ent, false); ok {
		e.sendSoon()
	}
	return nil
}

// applyAtomic changes the aligned word w as the request asks and returns
// its value before. A Watched region's lock keeps its readers from seeing
// the change half done (they read under it). Called with QP.mu held (the
// region's lock is a leaf under it, as in putWord).
func (e *engine) applyAtomic(x *regionExt, w []byte, a *rdmap.AtomicRequestFields) uint64 {
	if x != nil && x.watch != nil {
		x.watch.Lock()
		defer x.watch.Unlock()
	}
	p := (*uint64)(unsafe.Pointer(&w[0]))
	for {
		old := atomic.LoadUint64(p)
		v := a.Op.Apply(old, a.Args)
		if v == old || atomic.CompareAndSwapUint64(p, old, v) {
			return old
		}
	}
}

// frameAtomicResponseLocked frames the response to inbound request c, an
// Atomic Request, and frees its slot. Called with the transmit token and
// QP.mu held.
func (e *engine) frameAtomicResponseLocked(c uint32, ent *irqEntry) {
	tx := &e.tx
	hdr := rdmap.AppendAtomicResponse(tx.hdr[:0], tx.qn3MSN, ent.reqID, ent.orig)
	tx.qn3MSN++
	e.qp.stats.countTx(rdmap.OpAtomicResponse, len(hdr))
	// A header always fits an FPDU; a writer that refuses it is broken,
	// which the next write reports.
	_ = tx.w.WriteFPDU(hdr)
	e.irq.finish(c)
	e.qp.checkDrainedLocked()
	tx.cur = txNone
}

// rxAtomicResponse matches an Atomic Response to the oldest outstanding
// request of queue 1, which must be the Atomic Request of that ID.
func (e *engine) rxAtomicResponse(h *rdmap.Header, n int) error {
	rx := &e.rx
	hdr := h.Bytes()
	resp := h.AtomicResponse()
	if _, err := rx.uq.Receive(h.Untagged(), n, rdmap.AtomicResponseBodyLen); err != nil {
		return err
	}
	if err := e.matchResponse(reqAtomic, resp.ID(), rdmap.AtomicRespUnexpected, rdmap.AtomicMalformed, hdr, n); err != nil {
		return err
	}
	rx.pend = rxPending{action: rxAtomicDone, orig: resp.Orig()}
	return nil
}

// commitAtomicDone places the original value into the work request's
// 8-byte SGE (in the machine's byte order, as MR.LoadUint64 reads it) and
// completes it.
func (e *engine) commitAtomicDone(*rdmap.Header, int) error {
	qp := e.qp
	v := e.rx.pend.orig
	qp.mu.Lock()
	if ent, ok := e.orq.oldest(); ok {
		w, refs := qp.sq.at(ent.sqCtr)
		if len(refs) == 1 {
			putWord(refs[0], v)
		}
		w.done = true
		e.orq.pop()
		qp.completeSQLocked()
	}
	qp.mu.Unlock()
	e.sendSoon() // an ORD credit is free
	return nil
}

// putWord stores v into the 8 bytes of r.
func putWord(r sgeRef, v uint64) {
	dst := r.buf[:8]
	var src [8]byte
	*(*uint64)(unsafe.Pointer(&src[0])) = v
	x := extOf(r.region)
	if x != nil && x.watch != nil {
		x.watch.Lock()
		defer x.watch.Unlock()
	}
	store := func() error {
		if aligned8(dst) {
			store8(dst, src[:])
		} else {
			copy(dst, src[:])
		}
		return nil
	}
	if x != nil && x.mayFault {
		_ = guardFault(x, store)
		return
	}
	_ = store()
}
