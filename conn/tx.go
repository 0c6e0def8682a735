package conn

import (
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

type txKind uint8

const (
	txNone txKind = iota
	txSQ          // a send-queue message being segmented
	txIRQ         // a Read Response being segmented
)

// txState is the transmit side of a connection, owned by whoever holds the
// transmit token (engine.txMu). Bytes reach the socket in the order they
// are framed under it, and MSNs are assigned under it.
type txState struct {
	w          *mpa.Writer
	crc        bool
	seg        ddp.Segmenter
	hdr        [rdmap.MaxTerminateLen]byte
	segPayload [][]byte
	pieces     [][]byte
	cur        txKind
	curCtr     uint32     // SQ or IRQ counter of the current message
	curX       *regionExt // the region a Read Response reads, for fault containment
	sendMSN    uint32
	rreqMSN    uint32
	qn3MSN     uint32 // of Flush and Atomic Responses (QN 3: one sequence)
	reqID      uint32 // the last Flush or Atomic Request ID used
	immAfter   bool   // the current RDMA Write ends with an Immediate Data message
	imm        uint64
	preferIRQ  bool
	stage      bool     // the current message's payload is copied (stageFor)
	sent       []uint32 // SQ counters of messages whose last FPDU awaits the flush
	// The last look under QP.mu (nextLocked) started a message and found
	// nothing else ready. Valid while the token is held (txUnlock clears
	// it): work that comes meanwhile finds the token taken and kicks.
	nothingMore bool
	// The run of posts that found the send queue idle (QP.sendLocked).
	lastIdlePost  int64 // nanotime of the last
	inlineRun     int   // how many posts the run has had
	runAfterWrite bool  // the run began with an RDMA Write
}

func (tx *txState) init(c net.Conn, res *mpa.Result) {
	tx.crc = res.CRC
	tx.w = mpa.NewWriter(c, mpa.WriterConfig{CRC: res.CRC, Markers: res.SendMarkers})
	tx.sendMSN, tx.rreqMSN, tx.qn3MSN = 1, 1, 1
	// segPayload, pieces and sent (2.8 KiB at their largest) are made at
	// the first message framed and grown by append, then kept: a queue
	// pair that never sends holds none of them.
}

// abandon drops the message being framed and everything queued and not
// yet written; it reports whether the stream stands at an FPDU boundary.
func (tx *txState) abandon() bool {
	tx.cur, tx.curX = txNone, nil
	tx.immAfter = false
	tx.sent = tx.sent[:0]
	return tx.w.Abandon()
}

// sendTerminate sends t as the stream's last FPDU, bounded in time.
func (tx *txState) sendTerminate(c net.Conn, t *rdmap.Terminate) error {
	c.SetWriteDeadline(time.Now().Add(terminateTimeout))
	if err := tx.w.WriteFPDU(rdmap.AppendTerminate(tx.hdr[:0], t)); err != nil {
		return err
	}
	return tx.w.Flush()
}

// transmitter is the goroutine that usually holds the transmit token: it
// frames and sends send-queue messages and Read Responses while there is
// work, and runs send-completion handlers with the token released. It runs
// only while there is work: QP.kick starts it (txRunning), and it ends once
// no kick came since its last look, so an idle queue pair parks no
// goroutine for its transmit side. At the end of the connection it ends
// for good, leaving txRunning set so that no kick starts another.
func (e *engine) transmitter() {
	qp := e.qp
	for {
		e.txMu.Lock()
		e.transmit()
		e.txUnlock()
		qp.deliver()
		qp.mu.Lock()
		over := e.txEnded
		qp.mu.Unlock()
		if over {
			return
		}
		select {
		case <-qp.wake:
			continue
		default:
		}
		// Idle. A kick puts its token in wake before it looks at
		// txRunning: either it sees the flag clear and starts a
		// transmitter, or this look finds its token.
		e.txRunning.Store(false)
		select {
		case <-qp.wake:
			if e.txRunning.CompareAndSwap(false, true) {
				continue
			}
			// The kick started another, which transmits first thing.
		default:
		}
		return
	}
}

// transmit sends everything that is ready, blocking on the socket. On a
// failed connection it ends the transmit role. Called with txMu held.
func (e *engine) transmit() {
	for {
		more, alive := e.fill()
		if !alive {
			e.endTxLocked()
			return
		}
		if e.tx.w.Pending() > 0 {
			if err := e.tx.w.Flush(); err != nil {
				e.writeFailed(err)
				e.endTxLocked()
				return
			}
			e.afterFlush()
		}
		if !more {
			// What crypto/tls wrote past a poster's write, or of its own
			// (a KeyUpdate reply), waits in the write-behind backlog.
			if t := e.tlsw; t != nil && t.wb.pending() > 0 {
				if err := t.wb.drainTo(0); err != nil {
					e.writeFailed(err)
					e.endTxLocked()
				}
			}
			return
		}
	}
}

// transmitNow is the non-blocking form of transmit, for goroutines that
// must not wait on the network (posting, the receive token holder): it
// frames one batch and writes what the socket takes now; whatever remains
// is left to the transmitter goroutine. Called with txMu held.
func (e *engine) transmitNow() {
	more, alive := e.fill()
	if !alive {
		e.endTxLocked()
		return
	}
	if e.tx.w.Pending() > 0 {
		var done bool
		var err error
		if t := e.tlsw; t != nil {
			done, err = t.tryFlush(e.tx.w)
		} else {
			done, err = e.tx.w.TryFlush()
		}
		if err != nil {
			e.writeFailed(err)
			e.endTxLocked()
			return
		}
		if done {
			e.afterFlush()
		} else {
			more = true
		}
	}
	if more {
		e.qp.kick()
	}
}

// writeFailed ends the connection after a write error. A fault on memory
// registered with MayFault (EFAULT from writev) is reported as such.
func (e *engine) writeFailed(err error) {
	if errors.Is(err, syscall.EFAULT) {
		te := rdmap.LocalTerminateError(errors.Join(rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), err))
		t := te.Terminate
		e.fail(te, &t)
		return
	}
	e.fail(connectionLost(err), nil)
}

// sendSoon is send for the receive token holder: it answers Read Requests
// and unblocks queued work without a hand-off when it can.
func (e *engine) sendSoon() {
	if e.txMu.TryLock() {
		e.transmitNow()
		e.txUnlock()
		return
	}
	e.qp.kick()
}

// sendReleased sends a response that a region's hooks released, from the
// goroutine that released it — a persist worker, or the receive token
// holder when a hook releases at once — when the transmit token is free:
// waking the transmitter goroutine for it was one goroutine hand-off per
// remote flush. The caller may hold the receive token, so it may not run
// completion handlers (deliver); send completions the batch finished for
// a handler are left to the transmitter goroutine, which delivers them.
func (e *engine) sendReleased() {
	qp := e.qp
	if !e.txMu.TryLock() {
		qp.kick()
		return
	}
	e.transmitNow()
	e.txUnlock()
	if qp.handlers {
		qp.mu.Lock()
		pending := len(qp.pend) > 0
		qp.mu.Unlock()
		if pending {
			qp.kick()
		}
	}
}

// fill frames FPDUs into the writer until the batch is full (more=true) or
// nothing is ready (more=false). alive=false means the connection failed.
func (e *engine) fill() (more, alive bool) {
	tx := &e.tx
	for tx.w.Pending() < maxBatchFPDUs && tx.w.Buffered() < maxBatchBytes && tx.w.Staged() < maxBatchStaged {
		if e.dead.Load() {
			return false, false
		}
		if tx.cur == txNone {
			if tx.nothingMore {
				// The look that started the last message found nothing
				// else ready; whatever was posted or queued since found the
				// token held and kicked the transmitter, which looks again.
				tx.nothingMore = false
				return false, true
			}
			ok, alive := e.next()
			if !alive {
				return false, false
			}
			if !ok {
				return false, true
			}
			if tx.cur == txNone { // done without framing (local invalidate)
				continue
			}
		}
		if err := e.frameSegment(); err != nil {
			e.failTerminate(err)
			return false, false
		}
	}
	return true, true
}

// next picks the next message to send. It returns ok=false when nothing
// can be sent now, alive=false when the connection has failed.
func (e *engine) next() (ok, alive bool) {
	qp := e.qp
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return e.nextLocked()
}

// nextLocked is next for a caller that holds QP.mu (and the transmit
// token): an inline post starts its own message in the section that posted
// it. Having started one, it records whether anything else was ready
// (txState.nothingMore), which spares fill a second look under QP.mu.
func (e *engine) nextLocked() (ok, alive bool) {
	qp := e.qp
	if qp.state >= stateError {
		return false, false
	}
	if !e.txOpen {
		return false, true
	}
	irqReady := e.irq.ready()
	sqReady := !qp.sq.idle() && e.sqRunnableLocked()
	switch {
	case irqReady && (e.tx.preferIRQ || !sqReady):
		e.startResponseLocked()
		e.tx.preferIRQ = false
	case sqReady:
		ctr, w, refs := qp.sq.start()
		op := &sendOps[w.op]
		op.start(e, op, ctr, w, refs)
		e.tx.preferIRQ = true
	default:
		qp.checkDrainedLocked()
		return false, true
	}
	e.tx.nothingMore = !e.irq.ready() && (qp.sq.idle() || !e.sqRunnableLocked())
	return true, true
}

// sqRunnableLocked reports whether the next send-queue work request may
// start: a Read needs an ORD credit, a fenced request waits for every
// earlier Read to complete.
func (e *engine) sqRunnableLocked() bool {
	w := e.qp.sq.peekNext()
	outstanding := e.orq.outstanding()
	if w.flags&Fence != 0 && outstanding > 0 {
		return false
	}
	switch w.op {
	case OpRead, OpFlush, OpFetchAdd, OpCmpSwap: // requests on QN 1
		return !e.orq.full()
	}
	return true
}

func (e *engine) piecesOf(refs []sgeRef) [][]byte {
	e.tx.pieces = e.tx.pieces[:0]
	for _, r := range refs {
		e.tx.pieces = append(e.tx.pieces, r.buf)
	}
	return e.tx.pieces
}

// stageFor reports whether the payload of a message from refs is copied
// before it is framed. With CRC, the CRC must cover exactly the bytes
// sent, and bytes that change between the CRC and the writev make the
// peer end the connection with a CRC error. A region peers may write can
// change at any moment (a Write on another connection), so its bytes are
// copied; the application's own buffers of a Send or Write must not change
// until the work completes, as in verbs, and go out by reference. Read
// Responses are always copied (startResponseLocked): the application may
// keep writing a region that peers read.
func (e *engine) stageFor(refs []sgeRef) bool {
	if !e.tx.crc {
		return false
	}
	for _, r := range refs {
		if r.region != nil && r.region.Access().Has(stag.RemoteWrite) {
			return true
		}
	}
	return false
}

func (e *engine) startSend(op *sendOpInfo, ctr uint32, w *sendWQE, refs []sgeRef) {
	e.tx.stage = e.stageFor(refs)
	msn := e.tx.sendMSN
	e.tx.sendMSN++
	w.msn = msn
	err := rdmap.StartSend(&e.tx.seg, op.rdma, e.piecesOf(refs), e.mulpdu, uint32(w.invSTag), msn)
	e.startedSQ(ctr, w, err)
}

func (e *engine) startWrite(op *sendOpInfo, ctr uint32, w *sendWQE, refs []sgeRef) {
	if !e.negotiated(op, w) {
		return
	}
	e.tx.stage = e.stageFor(refs)
	err := rdmap.StartWrite(&e.tx.seg, e.piecesOf(refs), e.mulpdu, uint32(w.remote.STag), w.remote.TO)
	if err == nil && w.op == OpWriteImm {
		e.tx.immAfter, e.tx.imm = true, w.imm
	}
	e.startedSQ(ctr, w, err)
}

// startedSQ makes the segmenter's message the current one, or completes
// the work request in error if it could not be segmented (a Write whose TO
// would wrap): a local error of that work request only.
func (e *engine) startedSQ(ctr uint32, w *sendWQE, err error) {
	if err != nil {
		w.status, w.err, w.done = WCLocQPOpErr, err, true
		e.qp.completeSQLocked()
		return
	}
	e.tx.cur, e.tx.curCtr = txSQ, ctr
}

func (e *engine) startLocalInv(_ *sendOpInfo, ctr uint32, w *sendWQE, _ []sgeRef) {
	qp := e.qp
	if f := qp.pd.pd.InvalidateFrom(w.invSTag, qp); f != stag.OK {
		w.status, w.err = WCLocProtErr, f
	} else if r := qp.pd.pd.Find(w.invSTag); r != nil && r.RemoteUses() > 0 {
		// Remote accesses under way end before the work request completes;
		// revoking waits for them, so it runs off the transmit path, and
		// the request completes (in order) after.
		go e.finishLocalInv(r, ctr)
		return
	}
	w.done = true
	qp.completeSQLocked()
}

// finishLocalInv completes local invalidate ctr once no remote access of
// r is under way.
func (e *engine) finishLocalInv(r *stag.Region, ctr uint32) {
	qp := e.qp
	revokeRemote(qp.pd, r)
	qp.mu.Lock()
	// Unless the connection ended and flushed it meanwhile, the work
	// request is still in the started range.
	if ctr-qp.sq.head < qp.sq.next-qp.sq.head {
		w, _ := qp.sq.at(ctr)
		w.done = true
		qp.completeSQLocked()
	}
	qp.mu.Unlock()
	qp.deliver()
	qp.kick()
}

// startReadRequest frames an RDMA Read Request: one FPDU, no payload. The
// response is placed into the work request's SGL; the sink STag and TO
// carried in the request are those of its first SGE, and the receiver
// matches the response to the request by order, STag and TO.
func (e *engine) startReadRequest(_ *sendOpInfo, ctr uint32, w *sendWQE, refs []sgeRef) {
	var sink RemoteAddr
	if len(refs) > 0 {
		r := refs[0].region
		sink = RemoteAddr{STag: r.STag(), TO: r.TO(refs[0].off)}
	}
	msn := e.tx.rreqMSN
	e.tx.rreqMSN++
	w.msn = msn
	ent := orqEntry{sqCtr: ctr, msn: msn, sinkSTag: uint32(sink.STag), sinkTO: sink.TO, size: uint32(w.length)}
	e.orq.push(ent)
	hdr := rdmap.AppendReadRequest(e.tx.hdr[:0], msn, rdmap.ReadRequestFields{
		SinkSTag: ent.sinkSTag,
		SinkTO:   ent.sinkTO,
		Size:     ent.size,
		SrcSTag:  uint32(w.remote.STag),
		SrcTO:    w.remote.TO,
	})
	e.qp.stats.readsIssued.Add(1)
	e.qp.stats.countTx(rdmap.OpReadRequest, len(hdr))
	if err := e.tx.w.WriteFPDU(hdr); err != nil {
		// A header always fits an FPDU: the writer is broken.
		w.status, w.err, w.done = WCLocQPOpErr, err, true
		e.qp.completeSQLocked()
	}
}

// startResponseLocked makes the next inbound request's response the
// current message: a Read Response to segment, or a Flush Response framed
// at once.
func (e *engine) startResponseLocked() {
	c, ent := e.irq.startNext()
	switch ent.kind {
	case reqFlush:
		e.frameFlushResponseLocked(c, ent)
		return
	case reqAtomic:
		e.frameAtomicResponseLocked(c, ent)
		return
	}
	e.tx.pieces = append(e.tx.pieces[:0], ent.src)
	e.tx.stage = e.tx.crc
	e.tx.curX = nil
	if ent.region != nil {
		e.tx.curX = extOf(ent.region)
	}
	// The request was accepted and its sink range checked, so this cannot
	// fail; if it did, the stream could not go on.
	if err := rdmap.StartReadResponse(&e.tx.seg, e.tx.pieces, e.mulpdu, ent.sinkSTag, ent.sinkTO); err != nil {
		ent.err = err
	}
	e.tx.cur, e.tx.curCtr = txIRQ, c
}

// frameSegment frames the next segment of the current message.
func (e *engine) frameSegment() error {
	tx := &e.tx
	if tx.cur == txIRQ {
		e.qp.mu.Lock()
		err := e.irq.at(tx.curCtr).err
		e.qp.mu.Unlock()
		if err != nil {
			return rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil)
		}
		if tx.curX != nil && tx.curX.mayFault {
			// The CRC reads the region's memory.
			if err := guardFault(tx.curX, e.frameOne); err != nil {
				return errors.Join(rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), err)
			}
			return nil
		}
	}
	return e.frameOne()
}

func (e *engine) frameOne() error {
	tx := &e.tx
	if tx.segPayload == nil {
		tx.segPayload = make([][]byte, 0, MaxSGE+1)
	}
	seg, ok := tx.seg.Next(tx.hdr[:0], tx.segPayload[:0])
	if !ok {
		tx.cur = txNone
		return nil
	}
	if err := tx.w.Begin(seg.Header); err != nil {
		return err
	}
	add := tx.w.Payload
	if tx.stage {
		add = tx.w.PayloadCopy
	}
	for _, p := range seg.Payload {
		if err := add(p); err != nil {
			return err
		}
	}
	if err := tx.w.End(); err != nil {
		return err
	}
	e.qp.stats.countTx(rdmap.ControlOpcode(seg.Header[1]), len(seg.Header)+seg.Len)
	if seg.Last {
		if tx.cur == txIRQ {
			// The IRD credit is free as soon as the response's last
			// segment is on its way: the requester may reuse it the moment
			// it has the response, possibly before our writev returns. The
			// region stays referenced until the flush.
			qp := e.qp
			qp.mu.Lock()
			if r := e.irq.finish(tx.curCtr); r != nil {
				e.release = append(e.release, r)
			}
			qp.checkDrainedLocked()
			qp.mu.Unlock()
			tx.curX = nil
		} else {
			if tx.immAfter {
				tx.immAfter = false
				if err := e.frameImmediate(rdmap.OpImmediate, tx.imm); err != nil {
					return err
				}
			}
			tx.sent = append(tx.sent, tx.curCtr)
		}
		tx.cur = txNone
	}
	return nil
}

// afterFlush completes what the flush finished sending: Sends and Writes
// complete (in send-queue order), the regions of Read Responses are
// released.
func (e *engine) afterFlush() {
	e.active()
	tx := &e.tx
	qp := e.qp
	qp.mu.Lock()
	for _, ctr := range tx.sent {
		w, _ := qp.sq.at(ctr)
		w.done = true
	}
	if len(tx.sent) > 0 {
		qp.completeSQLocked()
	}
	for i, r := range e.release {
		r.ReleaseRemote()
		e.release[i] = nil
	}
	e.release = e.release[:0]
	qp.mu.Unlock()
	tx.sent = tx.sent[:0]
}
