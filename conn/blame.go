package conn

import (
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// wcStatusForTerminate is the completion status of the work request a
// peer's Terminate is about, as libibverbs programs know them over siw
// (siw_qp.c, siw_rdmap_complete and the Terminate receive path):
// protection and tagged-buffer errors are remote access errors, untagged
// buffer and malformed-request errors remote invalid requests, the rest
// remote operation errors.
func wcStatusForTerminate(c termcode.Code) WCStatus {
	switch {
	case c.Layer() == termcode.RDMAP && c.EType() == 1,
		c.Layer() == termcode.DDP && c.EType() == 1 && c != termcode.DDPTaggedVersion:
		return WCRemAccessErr
	case c.Layer() == termcode.DDP && c.EType() == 2,
		c == termcode.RDMAPUnexpectedOpcode, c == termcode.RDMAPInvalidVersion,
		c == termcode.DDPTaggedVersion:
		return WCRemInvReqErr
	}
	return WCRemOpErr
}

// blameTerminate finds the work request a peer's Terminate is about, from
// the headers it attached (the offending Read Request, or the DDP header of
// the offending segment), and completes it with the Terminate's status and
// the Terminate as its error. Requests that completed before keep their
// success; the connection's end flushes the later ones. A Terminate that
// names no outstanding request blames none. Called by the receive token
// holder.
func (e *engine) blameTerminate(te *rdmap.TerminateError) {
	qp := e.qp
	qp.mu.Lock()
	defer qp.mu.Unlock()
	w := e.blamedLocked(&te.Terminate)
	if w == nil || w.done {
		return
	}
	w.status, w.err, w.done = wcStatusForTerminate(te.Code), te, true
}

func (e *engine) blamedLocked(t *rdmap.Terminate) *sendWQE {
	qp := e.qp
	read := func(match func(*orqEntry) bool) *sendWQE {
		for c := e.orq.head; c != e.orq.tail; c++ {
			if ent := &e.orq.ent[slot(c, len(e.orq.ent))]; !ent.rtr && match(ent) {
				w, _ := qp.sq.at(ent.sqCtr)
				return w
			}
		}
		return nil
	}
	if len(t.RDMAHeader) == rdmap.ReadRequestBodyLen {
		rr := rdmap.ReadRequest(t.RDMAHeader)
		if w := read(func(o *orqEntry) bool {
			return o.sinkSTag == rr.SinkSTag() && o.sinkTO == rr.SinkTO() && o.size == rr.Size()
		}); w != nil {
			return w
		}
	}
	if len(t.DDPHeader) == 0 {
		return nil
	}
	if ddp.Control(t.DDPHeader[0]).Tagged() {
		if len(t.DDPHeader) < ddp.TaggedHeaderLen {
			return nil
		}
		h := ddp.Tagged(t.DDPHeader)
		for c := qp.sq.head; c != qp.sq.next; c++ {
			w, _ := qp.sq.at(c)
			if (w.op == OpWrite || w.op == OpWriteImm) && uint32(w.remote.STag) == h.STag() && h.TO() >= w.remote.TO && h.TO()-w.remote.TO <= uint64(w.length) {
				return w
			}
		}
		return nil
	}
	if len(t.DDPHeader) < ddp.UntaggedHeaderLen {
		return nil
	}
	h := ddp.Untagged(t.DDPHeader)
	switch h.QN() {
	case rdmap.QNReadRequest:
		return read(func(o *orqEntry) bool { return o.msn == h.MSN() })
	case rdmap.QNSend:
		for c := qp.sq.head; c != qp.sq.next; c++ {
			if w, _ := qp.sq.at(c); (sendOps[w.op].rdma != 0 || w.op == OpSendImm) && w.op != OpWrite && w.msn == h.MSN() {
				return w
			}
		}
	}
	return nil
}
