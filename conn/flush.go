package conn

import (
	"errors"
	"fmt"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// The Flush extension between iwarp-go peers
// (docs/rfc-notes/flush-extension.md): a Flush Request on QN 1, answered in
// order with RDMA Read Requests by a Flush Response on QN 3 once the range
// is persistent (or known not to be).

// ErrFlushUnsupported is the error of an OpFlush toward a peer that did
// not declare the Flush extension (any peer that is not iwarp-go).
var ErrFlushUnsupported = errors.New("iwarp: the peer does not answer Flush Requests")

// FlushError is the error of an OpFlush the peer answered with a failure
// status: its persist failed.
type FlushError struct {
	Status rdmap.FlushStatus
}

func (e *FlushError) Error() string {
	return "iwarp: the peer's flush failed: " + e.Status.String()
}

// FlushHooks is what RegionHooks implement when the region's memory can be
// made persistent (package pmemsink): FlushRequested is told of a peer's
// Flush Request for n bytes at off of the region, after everything the
// connection placed before it was reported, and the Flush Response waits
// until release.Release is called (here or later, from any goroutine).
// Without FlushHooks a flush reports visibility only. Like RegionHooks'
// methods it runs in the receive token holder and must not block.
type FlushHooks interface {
	FlushRequested(qp *QP, off, n int, persist bool, release FlushRelease)
}

// FlushRelease answers a held Flush Request (FlushHooks). It is a small
// value: copying it does not allocate.
type FlushRelease struct{ inboundRelease }

// Release sends the Flush Response: persisted says the range is in the
// persistence domain; err, a persist that failed (the response then says
// so; the stream goes on). Calls after the first, and after the
// connection ended, do nothing. When the connection's writer is free, the
// calling goroutine writes the response itself, without blocking (what
// the socket does not take is left to the queue pair's transmitter).
func (r FlushRelease) Release(persisted bool, err error) {
	// A failed persist is the response's status, not the stream's end.
	r.release(reqFlush, nil, func(ent *irqEntry) {
		ent.status, ent.achieved = flushOutcome(ent.placement, persisted, err)
	})
}

// flushOutcome is the status and achieved placement of a response.
func flushOutcome(asked rdmap.Placement, persisted bool, err error) (rdmap.FlushStatus, rdmap.Placement) {
	switch {
	case err != nil:
		return rdmap.FlushPersistFailed, rdmap.PlaceVisibility
	case asked&rdmap.PlacePersistence == 0:
		return rdmap.FlushOK, rdmap.PlaceVisibility
	case persisted:
		return rdmap.FlushOK, rdmap.PlaceVisibility | rdmap.PlacePersistence
	}
	return rdmap.FlushNotDurable, rdmap.PlaceVisibility
}

// rxExtension receives an OpExtension FPDU: the Flush extension's
// messages, by type.
func (e *engine) rxExtension(h *rdmap.Header, n int) error {
	if h.Ext == rdmap.ExtFlushRequest {
		return e.rxFlushRequest(h, n)
	}
	return e.rxFlushResponse(h, n)
}

func (e *engine) rxFlushRequest(h *rdmap.Header, n int) error {
	rx := &e.rx
	hdr := h.Bytes()
	fr := h.FlushRequest()
	if _, err := rx.uq.Receive(h.Untagged(), n, len(fr)); err != nil {
		return err
	}
	qp := e.qp
	qp.mu.Lock()
	full := e.irq.full()
	qp.mu.Unlock()
	if full {
		return rdmap.NewError(rdmap.ReadReqIRDExceeded, hdr, n, fr)
	}
	to, length := fr.TO(), fr.Length()
	if fr.WholeRegion() {
		if r := qp.pd.pd.Find(stag.STag(fr.STag())); r != nil {
			to, length = r.Base(), uint64(r.Len())
		}
	}
	// A flush places nothing, but its range must be memory the peer may
	// write (rule 10), with the checks and codes of a Read source.
	r, _, f := qp.pd.pd.LookupRemoteFrom(stag.STag(fr.STag()), to, length, stag.RemoteWrite, qp)
	if f != stag.OK {
		return rdmap.NewError(conditionFor(useReadSource, f), hdr, n, fr)
	}
	ent := irqEntry{kind: reqFlush, region: r, srcOff: int(to - r.Base()), flushLen: length, reqID: fr.ID(), placement: fr.Placement()}
	copy(ent.req[:], hdr)
	rx.pend = rxPending{action: rxQueueFlush, irq: ent}
	return e.holdRequest(r, reqFlush, hdr, n)
}

func (e *engine) commitQueueFlush(*rdmap.Header, int) error {
	qp := e.qp
	p := &e.rx.pend
	ent := p.irq
	p.irq = irqEntry{}
	var hooks FlushHooks
	if x := extOf(ent.region); x != nil {
		hooks, _ = x.hooks.(FlushHooks)
	}
	if hooks != nil {
		ent.state = irqHeld
	} else {
		ent.state = irqReady
		ent.status, ent.achieved = flushOutcome(ent.placement, false, nil)
	}
	ctr, gen, ok := e.queueInbound(ent, hooks != nil)
	// On the inbound queue (or released), where revoke finds it.
	e.endPlacing(ent.region)
	if !ok {
		return nil
	}
	if hooks != nil {
		hooks.FlushRequested(qp, ent.srcOff, int(ent.flushLen), ent.placement&rdmap.PlacePersistence != 0, FlushRelease{inboundRelease{e: e, ctr: ctr, gen: gen}})
	}
	e.sendSoon()
	return nil
}

func (e *engine) rxFlushResponse(h *rdmap.Header, n int) error {
	rx := &e.rx
	hdr := h.Bytes()
	resp := h.FlushResponse()
	if _, err := rx.uq.Receive(h.Untagged(), n, len(resp)); err != nil {
		return err
	}
	if err := e.matchResponse(reqFlush, resp.ID(), rdmap.ReadRespUnexpected, rdmap.ReadReqMalformed, hdr, n); err != nil {
		return err
	}
	rx.pend = rxPending{action: rxFlushDone, flushResp: resp.Fields()}
	return nil
}

func (e *engine) commitFlushDone(*rdmap.Header, int) error {
	qp := e.qp
	f := e.rx.pend.flushResp
	qp.mu.Lock()
	if ent, ok := e.orq.oldest(); ok {
		w, _ := qp.sq.at(ent.sqCtr)
		switch f.Status {
		case rdmap.FlushOK, rdmap.FlushNotDurable:
			if f.Achieved&rdmap.PlacePersistence != 0 && f.Status == rdmap.FlushOK {
				w.wcFlags |= WCFlushPersistent
			}
		default:
			w.status, w.err = WCRemOpErr, &FlushError{Status: f.Status}
		}
		w.done = true
		e.orq.pop()
		qp.completeSQLocked()
	}
	qp.mu.Unlock()
	e.sendSoon()
	return nil
}

// startFlush frames an OpFlush as a Flush Request: one FPDU, QN 1, the next
// MSN of queue 1, an ORD credit.
func (e *engine) startFlush(_ *sendOpInfo, ctr uint32, w *sendWQE, _ []sgeRef) {
	if e.ext&rdmap.ExtFlush == 0 {
		w.status, w.err, w.done = WCLocQPOpErr, ErrFlushUnsupported, true
		e.qp.completeSQLocked()
		return
	}
	tx := &e.tx
	msn := tx.rreqMSN
	tx.rreqMSN++
	tx.reqID++
	w.msn = msn
	e.orq.push(orqEntry{sqCtr: ctr, msn: msn, kind: reqFlush, reqID: tx.reqID})
	hdr := rdmap.AppendFlushRequest(tx.hdr[:0], msn, rdmap.FlushRequestFields{
		ID:          tx.reqID,
		STag:        uint32(w.remote.STag),
		TO:          w.remote.TO,
		Length:      w.flushLen,
		Placement:   rdmap.PlaceVisibility | rdmap.PlacePersistence,
		WholeRegion: w.flags&FlushRegion != 0,
	})
	e.qp.stats.readsIssued.Add(1)
	e.qp.stats.countTx(rdmap.OpExtension, len(hdr))
	if err := tx.w.WriteFPDU(hdr); err != nil {
		w.status, w.err, w.done = WCLocQPOpErr, fmt.Errorf("iwarp: framing a Flush Request: %w", err), true
		e.qp.completeSQLocked()
	}
}

// frameFlushResponseLocked frames the response to inbound request c, a
// Flush Request, and frees its slot. Called with the transmit token and
// QP.mu held.
func (e *engine) frameFlushResponseLocked(c uint32, ent *irqEntry) {
	tx := &e.tx
	hdr := rdmap.AppendFlushResponse(tx.hdr[:0], tx.qn3MSN, rdmap.FlushResponseFields{
		ID: ent.reqID, Status: ent.status, Achieved: ent.achieved,
	})
	tx.qn3MSN++
	e.qp.stats.countTx(rdmap.OpExtension, len(hdr))
	// A header always fits an FPDU; a writer that refuses it is broken,
	// which the next flush reports.
	_ = tx.w.WriteFPDU(hdr)
	if r := e.irq.finish(c); r != nil {
		e.release = append(e.release, r)
	}
	e.qp.checkDrainedLocked()
	tx.cur = txNone
}
