package conn

import (
	"errors"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// errStop ends the receiver after a Terminate from the peer was handled.
var errStop = errors.New("stop")

// receiver is the goroutine that reads FPDUs, validates them and places
// their payload directly into registered memory. It never waits for the
// application or the transmitter: completions go into reserved CQ slots and
// Read Requests into the IRD-bounded inbound read queue.
func (e *engine) receiver() {
	defer close(e.rxDone)
	for {
		if err := e.receiveOne(); err != nil {
			e.receiveFailed(err)
			return
		}
	}
}

func (e *engine) receiveOne() error {
	n, err := e.r.Next()
	if err != nil {
		return err
	}
	peek := min(n, rdmap.MaxHeaderLen)
	b, err := e.r.Peek(peek)
	if err != nil {
		return err
	}
	hb := e.rxHdr[:copy(e.rxHdr[:], b)]
	h, err := rdmap.Parse(hb, n)
	if err != nil {
		return err
	}
	if err := e.r.Discard(h.Len); err != nil {
		return err
	}
	e.rxPend = rxPending{}
	switch {
	case h.Op == rdmap.OpWrite:
		err = e.rxWrite(&h, n)
	case h.Op == rdmap.OpReadResponse:
		err = e.rxReadResponse(&h, n)
	case h.Op.IsSend():
		err = e.rxSend(&h, n)
	case h.Op == rdmap.OpReadRequest:
		err = e.rxReadRequest(&h, n)
	case h.Op == rdmap.OpTerminate:
		err = e.rxTerminate(&h, n)
	}
	if err != nil {
		return err
	}
	// The CRC covers what was just placed: nothing completes before it
	// is verified, and a failure ends the stream.
	if err := e.r.End(); err != nil {
		return err
	}
	e.sendRTRWait = false
	if !e.sawFPDU {
		e.sawFPDU = true
		e.openTx()
	}
	return e.commit(&h, n)
}

// rxWrite places an RDMA Write segment into the region its STag names.
func (e *engine) rxWrite(h *rdmap.Header, n int) error {
	ts, err := e.tr.Receive(h.Tagged(), n)
	if err != nil {
		return err
	}
	if !ts.Lookup { // zero-length message, e.g. an RFC 6581 Write RTR
		return nil
	}
	if ts.First {
		// Order this placement after everything the application did before
		// its last post on this queue pair (typically: reading the buffer,
		// then telling the peer it may write again). The network already
		// orders them; this makes the Go memory model, and the race
		// detector, see it too when both ends run in one process.
		e.qp.mu.Lock()
		e.qp.mu.Unlock()
	}
	dst, f := e.qp.pd.pd.Lookup(stag.STag(ts.STag), ts.TO, uint64(ts.Len), stag.RemoteWrite)
	if f != stag.OK {
		return rdmap.NewError(conditionFor(useWriteSink, f), e.rxHdr[:h.Len], n, nil)
	}
	return e.r.ReadFull(dst)
}

// rxReadResponse places a Read Response segment into the SGL of the oldest
// outstanding Read (responses come in request order).
func (e *engine) rxReadResponse(h *rdmap.Header, n int) error {
	ts, err := e.tr.Receive(h.Tagged(), n)
	if err != nil {
		return err
	}
	qp := e.qp
	qp.mu.Lock()
	if e.orqHead == e.orqTail {
		qp.mu.Unlock()
		return rdmap.NewError(rdmap.ReadRespUnexpected, e.rxHdr[:h.Len], n, nil)
	}
	ent := &e.orq[slot(e.orqHead, len(e.orq))]
	var refs []sgeRef
	if !ent.rtr {
		i := slot(ent.sqCtr, len(qp.sq))
		refs = qp.sqSGE[i*qp.caps.MaxSendSGE : i*qp.caps.MaxSendSGE+qp.sq[i].nsge]
	}
	qp.mu.Unlock()
	if ts.STag != ent.sinkSTag {
		return rdmap.NewError(rdmap.ReadRespInvalidSTag, e.rxHdr[:h.Len], n, nil)
	}
	off := ts.TO - ent.sinkTO
	if ts.TO < ent.sinkTO || off != uint64(ent.received) || off+uint64(ts.Len) > uint64(ent.size) {
		return rdmap.NewError(rdmap.ReadRespBaseBounds, e.rxHdr[:h.Len], n, nil)
	}
	if err := e.scatter(refs, off, ts.Len); err != nil {
		return err
	}
	ent.received += uint32(ts.Len)
	if ts.Last {
		if ent.received != ent.size {
			return rdmap.NewError(rdmap.ReadRespBaseBounds, e.rxHdr[:h.Len], n, nil)
		}
		e.rxPend.action = rxReadDone
	}
	return nil
}

// rxSend places a Send segment into the buffer of the oldest posted receive.
func (e *engine) rxSend(h *rdmap.Header, n int) error {
	qp := e.qp
	qp.mu.Lock()
	bufLen := ddp.NoBuffer
	var refs []sgeRef
	switch {
	case e.sendRTRWait:
		bufLen = 0 // the RFC 6581 zero-length Send RTR uses no buffer
	case qp.rqLen() > 0:
		i := slot(qp.rqHead, len(qp.rq))
		bufLen = qp.rq[i].length
		refs = qp.rqSGE[i*qp.caps.MaxRecvSGE : i*qp.caps.MaxRecvSGE+qp.rq[i].nsge]
	}
	qp.mu.Unlock()
	us, err := e.uq.Receive(h.Untagged(), n, bufLen)
	if err != nil {
		return err
	}
	if e.sendRTRWait {
		return nil
	}
	if err := e.scatter(refs, uint64(us.MO), us.Len); err != nil {
		return err
	}
	if us.Last {
		e.rxPend = rxPending{action: rxRecvDone, msgLen: us.MsgLen}
		if h.Op.Solicited() {
			e.rxPend.flags |= WCSolicited
		}
		if h.Op.Invalidates() {
			e.rxPend.flags |= WCWithInv
			e.rxPend.invSTag = h.InvalidateSTag()
		}
	}
	return nil
}

// rxReadRequest validates a peer's RDMA Read Request; once its CRC is
// verified it joins the inbound read queue.
func (e *engine) rxReadRequest(h *rdmap.Header, n int) error {
	// The 28-byte Read Request header is the DDP payload of its segment.
	if _, err := e.uq.Receive(h.Untagged(), n, rdmap.ReadRequestBodyLen); err != nil {
		return err
	}
	rr := h.ReadRequest()
	qp := e.qp
	qp.mu.Lock()
	full := int(e.irqTail-e.irqHead) >= e.irdLimit
	qp.mu.Unlock()
	if full {
		return rdmap.NewError(rdmap.ReadReqIRDExceeded, e.rxHdr[:h.Len], n, rr)
	}
	size := uint64(rr.Size())
	if rr.SinkTO()+size < rr.SinkTO() {
		return rdmap.NewError(rdmap.ReadReqMalformed, e.rxHdr[:h.Len], n, rr)
	}
	var src []byte
	if size > 0 {
		// A zero-length Read (the RFC 6581 Read RTR among others) moves
		// nothing, so its source is not looked up (siw does the same).
		var f stag.Failure
		src, f = qp.pd.pd.Lookup(stag.STag(rr.SrcSTag()), rr.SrcTO(), size, stag.RemoteRead)
		if f != stag.OK {
			return rdmap.NewError(conditionFor(useReadSource, f), e.rxHdr[:h.Len], n, rr)
		}
	}
	e.rxPend = rxPending{action: rxQueueRead, irq: irqEntry{src: src, sinkSTag: rr.SinkSTag(), sinkTO: rr.SinkTO()}}
	return nil
}

// rxTerminate decodes a Terminate from the peer; it ends the connection.
func (e *engine) rxTerminate(h *rdmap.Header, n int) error {
	k := copy(e.rxTerm[:], e.rxHdr[:h.Len])
	take := min(n-h.Len, len(e.rxTerm)-k)
	if err := e.r.ReadFull(e.rxTerm[k : k+take]); err != nil {
		return err
	}
	rt, err := rdmap.ParseTerminate(e.rxTerm[:k+take])
	if err != nil {
		return err
	}
	e.rxPend = rxPending{action: rxTerminate, term: rt.Err()}
	return nil
}

// commit carries out what a verified FPDU asked for.
func (e *engine) commit(h *rdmap.Header, n int) error {
	qp := e.qp
	p := &e.rxPend
	switch p.action {
	case rxRecvDone:
		if p.flags&WCWithInv != 0 {
			switch f := qp.pd.pd.RemoteInvalidate(stag.STag(p.invSTag)); f {
			case stag.OK:
			default:
				return rdmap.NewError(conditionFor(useInvalidate, f), e.rxHdr[:h.Len], n, nil)
			}
		}
		qp.mu.Lock()
		i := slot(qp.rqHead, len(qp.rq))
		w := &qp.rq[i]
		releaseRefs(qp.rqSGE[i*qp.caps.MaxRecvSGE : i*qp.caps.MaxRecvSGE+w.nsge])
		wc := WorkCompletion{ID: w.id, QPN: qp.qpn, Op: WCRecv, Flags: p.flags, ByteLen: uint32(p.msgLen), InvSTag: p.invSTag}
		*w = recvWQE{}
		qp.rqHead++
		qp.completeLocked(qp.rcq, &wc)
		qp.mu.Unlock()
		qp.deliver()
	case rxReadDone:
		qp.mu.Lock()
		ent := &e.orq[slot(e.orqHead, len(e.orq))]
		if !ent.rtr {
			qp.sq[slot(ent.sqCtr, len(qp.sq))].done = true
		}
		*ent = orqEntry{}
		e.orqHead++
		qp.completeSQLocked()
		qp.mu.Unlock()
		qp.deliver()
		e.sendSoon() // an ORD credit is free; fenced work may run
	case rxQueueRead:
		qp.mu.Lock()
		e.irq[slot(e.irqTail, len(e.irq))] = p.irq
		e.irqTail++
		qp.mu.Unlock()
		e.sendSoon()
	case rxTerminate:
		e.fail(p.term, nil)
		return errStop
	}
	return nil
}

// scatter reads n payload bytes into the SGL refs, starting off bytes into
// it. The caller has checked that they fit.
func (e *engine) scatter(refs []sgeRef, off uint64, n int) error {
	for _, r := range refs {
		if n == 0 {
			break
		}
		l := uint64(len(r.buf))
		if off >= l {
			off -= l
			continue
		}
		take := min(uint64(n), l-off)
		if err := e.r.ReadFull(r.buf[off : off+take]); err != nil {
			return err
		}
		n -= int(take)
		off = 0
	}
	if n != 0 {
		return rdmap.NewError(rdmap.DDPLocalCatastrophic, nil, 0, nil)
	}
	return nil
}

// openTx lets the transmitter send (the responder saw the initiator's
// first FPDU, or the initiator's first-FPDU delay has passed).
func (e *engine) openTx() {
	e.qp.mu.Lock()
	e.txOpen = true
	e.qp.mu.Unlock()
	e.qp.kick()
}

// receiveFailed ends the connection after the receiver stopped.
func (e *engine) receiveFailed(err error) {
	var coded termcode.Code
	switch {
	case err == errStop:
	case errors.Is(err, io.EOF):
		e.fail(ErrPeerClosed, nil)
	case errors.Is(err, mpa.ErrConnectionLost):
		e.fail(connectionLost(err), nil)
	case errors.As(err, &coded):
		e.failTerminate(err)
	default:
		e.fail(connectionLost(err), nil)
	}
}

func connectionLost(err error) error {
	if errors.Is(err, ErrConnectionLost) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrConnectionLost, err)
}
