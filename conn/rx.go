package conn

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// rxState is the receive side of a connection, owned by whoever holds the
// receive token (engine.rxMu).
type rxState struct {
	r           *mpa.Reader
	uq          *ddp.UntaggedQueues
	tr          ddp.TaggedReceiver
	hdr         [rdmap.MaxHeaderLen]byte
	term        [rdmap.MaxTerminateLen]byte
	word        [8]byte          // an aligned 8-byte Write, stored after its CRC
	h           rdmap.Header     // the FPDU being received (handlers get a pointer)
	ext         rdmap.Extensions // negotiated: their opcodes are accepted
	sawFPDU     bool
	sendRTRWait bool   // a zero-length Send RTR must be the first FPDU
	readGot     uint32 // bytes of the oldest outstanding Read's response placed
	pend        rxPending
}

func (rx *rxState) init(c net.Conn, res *mpa.Result, ext rdmap.Extensions) {
	rx.r = mpa.NewReader(c, mpa.ReaderConfig{CRC: res.CRC, Markers: res.RecvMarkers, BufferSize: readerBuffer, ReleaseIdle: true, VerifyFirst: true})
	queues := rdmap.NumQueues
	if ext != 0 {
		queues = int(rdmap.QNFlushResponse) + 1 // responses to QN 1's other requests come on QN 3
	}
	rx.uq = ddp.NewUntaggedQueues(queues)
	rx.ext = ext
}

// rxAction is what a received FPDU does once its CRC is verified.
type rxAction uint8

const (
	rxNothing rxAction = iota
	rxRecvDone
	rxReadDone
	rxQueueRead
	rxTerminate
	rxQueueFlush
	rxFlushDone
	rxQueueAtomic
	rxAtomicDone
	numRxActions
)

// rxPending is what the FPDU being received will do once its CRC checks:
// placements that wait for it (an 8-byte store, a copy into a watched
// region), what hooks to tell, what completes.
type rxPending struct {
	action  rxAction
	msgLen  int
	flags   WCFlags
	invSTag uint32
	irq     irqEntry
	term    *rdmap.TerminateError
	// flushResp is a Flush Response received.
	flushResp rdmap.FlushResponseFields
	imm       uint64                    // of an Immediate Data message (WCWithImm)
	orig      uint64                    // an Atomic Response's original value
	atomic    rdmap.AtomicRequestFields // an Atomic Request to carry out

	// A placement into a region with a remote reference (RDMA Write): the
	// reference is dropped once the bytes are in place.
	ref     *stag.Region
	refX    *regionExt
	refOff  int
	refLen  int
	store8  []byte  // the 8 aligned bytes to store into (rx.word holds them)
	staged  *[]byte // a watched region's payload, copied in after the CRC
	stageTo []byte
}

// rxHandler checks and places one FPDU of its opcode. It reads the
// payload; the CRC is verified after it returns, then commit runs.
type rxHandler func(e *engine, h *rdmap.Header, n int) error

// rxTable is the receive side's opcode table (siw's iwarp_pktinfo is the
// model): a new opcode is one entry and its handler.
var rxTable = [16]rxHandler{
	rdmap.OpWrite:            (*engine).rxWrite,
	rdmap.OpReadRequest:      (*engine).rxReadRequest,
	rdmap.OpReadResponse:     (*engine).rxReadResponse,
	rdmap.OpSend:             (*engine).rxSend,
	rdmap.OpSendInvalidate:   (*engine).rxSend,
	rdmap.OpSendSE:           (*engine).rxSend,
	rdmap.OpSendSEInvalidate: (*engine).rxSend,
	rdmap.OpTerminate:        (*engine).rxTerminate,
	rdmap.OpImmediate:        (*engine).rxImmediate,
	rdmap.OpImmediateSE:      (*engine).rxImmediate,
	rdmap.OpAtomicRequest:    (*engine).rxAtomicRequest,
	rdmap.OpAtomicResponse:   (*engine).rxAtomicResponse,
	rdmap.OpExtension:        (*engine).rxExtension,
}

// commitTable carries out what a verified FPDU asked for, by action.
var commitTable = [numRxActions]func(e *engine, h *rdmap.Header, n int) error{
	rxNothing:     func(*engine, *rdmap.Header, int) error { return nil },
	rxRecvDone:    (*engine).commitRecv,
	rxReadDone:    (*engine).commitRead,
	rxQueueRead:   (*engine).commitQueueRead,
	rxTerminate:   (*engine).commitTerminate,
	rxQueueFlush:  (*engine).commitQueueFlush,
	rxFlushDone:   (*engine).commitFlushDone,
	rxQueueAtomic: (*engine).commitQueueAtomic,
	rxAtomicDone:  (*engine).commitAtomicDone,
}

// errStop ends the receive role after a Terminate from the peer.
var errStop = errors.New("stop")

// receiver is the goroutine that usually holds the receive token. It reads
// FPDUs, validates them and places their payload directly into registered
// memory. It never waits for the application or the transmitter:
// completions go into reserved CQ slots and Read Requests into the
// IRD-bounded inbound read queue. It lets go of the token to run
// completion handlers.
func (e *engine) receiver() {
	qp := e.qp
	e.rxMu.Lock()
	for !e.dead.Load() {
		if e.rx.r.Idle() && e.waitersReceive() {
			// A goroutine in CQ.Wait receives for this connection: leave
			// it the socket and look again in a while.
			e.standByFor()
			continue
		}
		if err := e.receiveOne(); err != nil {
			e.receiveFailed(err)
			break
		}
		if qp.handlers {
			e.rxUnlock()
			qp.deliver()
			e.rxMu.Lock()
		}
	}
	e.rxUnlock()
	qp.deliver()
}

func (e *engine) receiveOne() error {
	rx := &e.rx
	n, err := rx.r.Next()
	if err != nil {
		return err
	}
	b, err := rx.r.Peek(min(n, rdmap.MaxHeaderLen))
	if err != nil {
		return err
	}
	hb := rx.hdr[:copy(rx.hdr[:], b)]
	// The header lives in rx, not on the stack: the handlers behind the
	// table would make a local one escape, one allocation per FPDU. The
	// opcodes of extensions not negotiated fail here, as unknown ones.
	rx.h, err = rdmap.ParseWith(hb, n, rx.ext)
	if err != nil {
		return err
	}
	h := &rx.h
	st := &e.qp.stats
	st.fpdusRx[h.Op].Add(1)
	st.bytesRx[h.Op].Add(uint64(n))
	if err := rx.r.Discard(h.Len); err != nil {
		return err
	}
	if rx.sendRTRWait {
		return e.checkSendRTR(h, n)
	}
	rx.pend = rxPending{}
	err = rxTable[h.Op](e, h, n)
	if err == nil {
		// The CRC covers what was just placed: nothing completes before it
		// is verified, and a failure ends the stream.
		err = rx.r.End()
	}
	if err != nil {
		return e.placementFailed(err, h, n)
	}
	if err := e.placeAfterCRC(); err != nil {
		return err
	}
	if !rx.sawFPDU {
		rx.sawFPDU = true
		e.openTx()
	}
	e.active()
	return commitTable[rx.pend.action](e, h, n)
}

// checkSendRTR takes the first FPDU when a Send RTR was negotiated (RFC
// 6581): it must be exactly that, a complete zero-length Send (L set, MSN
// 1, MO 0), which consumes MSN 1 and places nothing. Anything else ends
// the stream: no receive is ever consumed by it.
func (e *engine) checkSendRTR(h *rdmap.Header, n int) error {
	e.rx.sendRTRWait = false
	u := h.Untagged()
	if h.Op != rdmap.OpSend || !h.Last || h.PayloadLen != 0 || u == nil || u.MSN() != 1 || u.MO() != 0 {
		return rdmap.NewError(rdmap.NoMatchingRTR, nil, 0, nil)
	}
	if _, err := e.rx.uq.Receive(u, n, 0); err != nil {
		return err
	}
	if err := e.rx.r.End(); err != nil {
		return err
	}
	e.rx.sawFPDU = true
	e.openTx()
	return nil
}

// placementFailed turns the error of an FPDU that failed after its checks
// into the error that ends the stream, and releases what it held. A
// placement into a region whose invalidation cut it short is reported as
// the invalid STag it now is; one into memory that faulted as a local
// catastrophic error that still names the fault.
func (e *engine) placementFailed(err error, h *rdmap.Header, n int) error {
	p := &e.rx.pend
	var fault *MemoryFaultError
	switch {
	case p.ref != nil && e.revoking.Load() == p.ref:
		err = rdmap.NewError(rdmap.WriteInvalidSTag, e.rx.hdr[:h.Len], n, nil)
	case p.irq.region != nil && e.revoking.Load() == p.irq.region:
		err = revokedRequest(p.irq.kind, e.rx.hdr[:h.Len], n)
	case errors.As(err, &fault) || errors.Is(err, syscall.EFAULT):
		err = errors.Join(rdmap.NewError(rdmap.DDPLocalCatastrophic, e.rx.hdr[:h.Len], n, nil), err)
	}
	e.dropPending()
	return err
}

// extOf returns what the engine needs to know of a region (nil for one
// registered outside this package).
func extOf(r *stag.Region) *regionExt {
	x, _ := r.Attachment().(*regionExt)
	return x
}

// rxWrite places an RDMA Write segment into the region its STag names.
func (e *engine) rxWrite(h *rdmap.Header, n int) error {
	rx := &e.rx
	ts, err := rx.tr.Receive(h.Tagged(), n)
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
		//lint:ignore SA2001 the lock and unlock are the synchronisation
		e.qp.mu.Unlock()
	}
	r, dst, f := e.qp.pd.pd.LookupRemoteFrom(stag.STag(ts.STag), ts.TO, uint64(ts.Len), stag.RemoteWrite, e.qp)
	if f != stag.OK {
		return rdmap.NewError(conditionFor(useWriteSink, f), rx.hdr[:h.Len], n, nil)
	}
	mr := extOf(r)
	p := &rx.pend
	p.ref, p.refX, p.refOff, p.refLen = r, mr, int(ts.TO-r.Base()), ts.Len
	// Publish the placement before looking at revocations (revokeRemote
	// does the opposite): one of the two sees the other.
	e.placing.Store(r)
	if e.revoking.Load() == r {
		return rdmap.NewError(rdmap.WriteInvalidSTag, rx.hdr[:h.Len], n, nil)
	}
	return e.placeTagged(mr, dst)
}

// placeTagged reads a tagged segment's payload into dst. An aligned 8-byte
// segment is stored with one 64-bit store after the CRC checks (what an
// "atomic write" of librpma relies on); a watched region's payload is
// staged and copied in under the region's lock after the CRC; memory that
// may fault is read under the fault guard.
func (e *engine) placeTagged(mr *regionExt, dst []byte) error {
	rx := &e.rx
	switch {
	case len(dst) == 8 && aligned8(dst):
		if err := rx.r.ReadFull(rx.word[:]); err != nil {
			return err
		}
		rx.pend.store8 = dst
		return nil
	case mr != nil && mr.watch != nil:
		buf := getStage()
		if err := rx.r.ReadFull((*buf)[:len(dst)]); err != nil {
			putStage(buf)
			return err
		}
		rx.pend.staged, rx.pend.stageTo = buf, dst
		return nil
	case mr != nil && mr.mayFault:
		return guardFault(mr, func() error { return rx.r.ReadFull(dst) })
	}
	return rx.r.ReadFull(dst)
}

// placeAfterCRC finishes the placements that wait for the CRC, tells the
// region's hooks what was placed, and drops the remote reference.
func (e *engine) placeAfterCRC() error {
	p := &e.rx.pend
	if p.ref == nil {
		return nil
	}
	var err error
	switch {
	case p.store8 != nil:
		if p.refX != nil && p.refX.mayFault {
			err = guardFault(p.refX, func() error { store8(p.store8, e.rx.word[:]); return nil })
		} else {
			store8(p.store8, e.rx.word[:])
		}
	case p.staged != nil:
		copyWatched(p.refX, p.stageTo, (*p.staged)[:len(p.stageTo)])
		putStage(p.staged)
		p.staged = nil
	}
	if err == nil && p.refX != nil && p.refX.hooks != nil {
		p.refX.hooks.Placed(e.qp, p.refOff, p.refLen)
	}
	e.endPlacing(p.ref)
	p.ref.ReleaseRemote()
	p.ref = nil
	return err
}

// endPlacing unpublishes a placement into r that ended whole. A revocation
// of r may have set a deadline to cut it, which would otherwise cut the
// next FPDU instead — one that may have nothing to do with r, and that a
// cut in its middle would end the stream for: that deadline is cleared
// (back to the holder's own), unless the connection has failed, whose
// deadline stays. After the clearing, the revocation's wait for r's users
// ends; a later FPDU naming r finds it invalid and is refused as such.
func (e *engine) endPlacing(r *stag.Region) {
	e.placing.Store(nil)
	if r == nil || e.revoking.Load() != r {
		return
	}
	e.cutMu.Lock()
	e.c.SetReadDeadline(e.rxDeadline)
	e.cutMu.Unlock()
	// fail sets dead before its deadline: either that deadline follows
	// the clearing, or dead is seen here.
	if e.dead.Load() {
		e.c.SetReadDeadline(time.Now())
	}
}

// dropPending releases what a failed FPDU held.
func (e *engine) dropPending() {
	p := &e.rx.pend
	if p.ref != nil {
		e.placing.Store(nil)
		p.ref.ReleaseRemote()
		p.ref = nil
	}
	if p.staged != nil {
		putStage(p.staged)
		p.staged = nil
	}
	if r := p.irq.region; r != nil {
		e.placing.Store(nil)
		r.ReleaseRemote()
		p.irq.region = nil
	}
}

// holdRequest publishes that the receive token holder holds region r for
// an inbound request (Read, Atomic or Flush) whose FPDU it has yet to read
// to its end, as a placement is published: an invalidation of r then cuts
// that read (revoke) instead of waiting for a peer that withholds the
// rest, which MR.Invalidate and a Send with Invalidate must never do. It
// returns the error of an invalidation already under way. The request
// must already be rx.pend's, so that a failure releases r (dropPending).
func (e *engine) holdRequest(r *stag.Region, k reqKind, hdr []byte, n int) error {
	// Publish before looking at revocations (revokeRemote does the
	// opposite): one of the two sees the other.
	e.placing.Store(r)
	if e.revoking.Load() == r {
		return revokedRequest(k, hdr, n)
	}
	return nil
}

// revokedRequest is the error of a request of kind k whose region was
// invalidated while its FPDU was read: the invalid STag it now is.
func revokedRequest(k reqKind, hdr []byte, n int) error {
	var body []byte // Read and Flush Requests attach their body
	if k != reqAtomic && len(hdr) > ddp.UntaggedHeaderLen {
		body = hdr[ddp.UntaggedHeaderLen:]
	}
	return rdmap.NewError(conditionFor(k.use(), stag.Invalidated), hdr, n, body)
}

// rxReadResponse places a Read Response segment into the SGL of the oldest
// outstanding Read (responses come in request order).
func (e *engine) rxReadResponse(h *rdmap.Header, n int) error {
	rx := &e.rx
	ts, err := rx.tr.Receive(h.Tagged(), n)
	if err != nil {
		return err
	}
	qp := e.qp
	qp.mu.Lock()
	ent, ok := e.orq.oldest()
	if !ok || ent.kind != reqRead {
		qp.mu.Unlock()
		return rdmap.NewError(rdmap.ReadRespUnexpected, rx.hdr[:h.Len], n, nil)
	}
	want := *ent
	var refs []sgeRef
	if !want.rtr {
		_, refs = qp.sq.at(want.sqCtr)
	}
	qp.mu.Unlock()
	if ts.STag != want.sinkSTag {
		return rdmap.NewError(rdmap.ReadRespInvalidSTag, rx.hdr[:h.Len], n, nil)
	}
	off := ts.TO - want.sinkTO
	if ts.TO < want.sinkTO || off != uint64(rx.readGot) || off+uint64(ts.Len) > uint64(want.size) {
		return rdmap.NewError(rdmap.ReadRespBaseBounds, rx.hdr[:h.Len], n, nil)
	}
	if err := e.scatter(refs, off, ts.Len); err != nil {
		return err
	}
	rx.readGot += uint32(ts.Len)
	if ts.Last {
		if rx.readGot != want.size {
			return rdmap.NewError(rdmap.ReadRespBaseBounds, rx.hdr[:h.Len], n, nil)
		}
		rx.pend.action = rxReadDone
	}
	return nil
}

// rxSend places a Send segment into the buffer of the receive the message
// goes into.
func (e *engine) rxSend(h *rdmap.Header, n int) error {
	rx := &e.rx
	w, refs, err := e.nextReceive(h, n)
	if err != nil {
		return err
	}
	bufLen := ddp.NoBuffer
	if w != nil {
		bufLen = w.length
	}
	us, err := rx.uq.Receive(h.Untagged(), n, bufLen)
	if err != nil {
		return err
	}
	if err := e.scatter(refs, uint64(us.MO), us.Len); err != nil {
		return err
	}
	if us.Last {
		rx.pend = rxPending{action: rxRecvDone, msgLen: us.MsgLen}
		if h.Op.Solicited() {
			rx.pend.flags |= WCSolicited
		}
		if h.Op.Invalidates() {
			rx.pend.flags |= WCWithInv
			rx.pend.invSTag = h.InvalidateSTag()
		}
	}
	return nil
}

// nextReceive returns the receive the Send or Immediate Data message of h
// goes into (w nil: none is posted). From a shared receive queue a receive
// is taken, for good, only for a segment whose untagged header passes every
// check the buffer does not decide (version, MSN, MO: RFC 5041 §7), tried
// on a copy of the queue's state; so a bad segment, which ends this
// stream, costs the other queue pairs no receive. Parse has checked the
// queue number.
func (e *engine) nextReceive(h *rdmap.Header, n int) (*recvWQE, []sgeRef, error) {
	qp := e.qp
	if qp.srq != nil {
		if q := e.rx.uq.Queue(rdmap.QNSend); !q.InProgress() {
			probe := *q
			if _, err := probe.Receive(h.Untagged(), n, math.MaxInt); err != nil {
				return nil, nil, err
			}
		}
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.recv.next()
}

// rxReadRequest validates a peer's RDMA Read Request; once its CRC is
// verified it joins the inbound read queue.
func (e *engine) rxReadRequest(h *rdmap.Header, n int) error {
	rx := &e.rx
	// The 28-byte Read Request header is the DDP payload of its segment.
	if _, err := rx.uq.Receive(h.Untagged(), n, rdmap.ReadRequestBodyLen); err != nil {
		return err
	}
	rr := h.ReadRequest()
	qp := e.qp
	qp.mu.Lock()
	full := e.irq.full()
	qp.mu.Unlock()
	if full {
		return rdmap.NewError(rdmap.ReadReqIRDExceeded, rx.hdr[:h.Len], n, rr)
	}
	size := uint64(rr.Size())
	// The response's segments must pass the requester's check that TO +
	// length does not wrap 64 bits (RFC 5041 §7.1 tagged check 5, by which
	// a sink range ending exactly at 2^64 wraps too).
	if size > 0 && rr.SinkTO() > math.MaxUint64-size {
		return rdmap.NewError(rdmap.ReadReqMalformed, rx.hdr[:h.Len], n, rr)
	}
	ent := irqEntry{sinkSTag: rr.SinkSTag(), sinkTO: rr.SinkTO()}
	copy(ent.req[:], rx.hdr[:rdmap.ReadRequestHeaderLen])
	if size > 0 {
		// A zero-length Read (the RFC 6581 Read RTR among others) moves
		// nothing, so its source is not looked up (siw does the same).
		r, src, f := qp.pd.pd.LookupRemoteFrom(stag.STag(rr.SrcSTag()), rr.SrcTO(), size, stag.RemoteRead, qp)
		if f != stag.OK {
			return rdmap.NewError(conditionFor(useReadSource, f), rx.hdr[:h.Len], n, rr)
		}
		ent.region, ent.src, ent.srcOff = r, src, int(rr.SrcTO()-r.Base())
	}
	rx.pend = rxPending{action: rxQueueRead, irq: ent}
	if ent.region != nil {
		return e.holdRequest(ent.region, reqRead, rx.hdr[:h.Len], n)
	}
	return nil
}

// rxTerminate decodes a Terminate from the peer; it ends the connection.
func (e *engine) rxTerminate(h *rdmap.Header, n int) error {
	rx := &e.rx
	k := copy(rx.term[:], rx.hdr[:h.Len])
	take := min(n-h.Len, len(rx.term)-k)
	if err := rx.r.ReadFull(rx.term[k : k+take]); err != nil {
		return err
	}
	rt, err := rdmap.ParseTerminate(rx.term[:k+take])
	if err != nil {
		return err
	}
	rx.pend = rxPending{action: rxTerminate, term: rt.Err()}
	return nil
}

func (e *engine) commitRecv(h *rdmap.Header, n int) error {
	qp := e.qp
	p := &e.rx.pend
	if p.flags&WCWithInv != 0 {
		if f := qp.pd.pd.RemoteInvalidateFrom(stag.STag(p.invSTag), qp); f != stag.OK {
			return rdmap.NewError(conditionFor(useInvalidate, f), e.rx.hdr[:h.Len], n, nil)
		}
		// Accesses of other connections still under way end before the
		// receive completes: after it, nothing touches that memory.
		if r := qp.pd.pd.Find(stag.STag(p.invSTag)); r != nil {
			revokeRemote(qp.pd, r)
		}
	}
	qp.mu.Lock()
	err := qp.completeRecvLocked(p)
	qp.mu.Unlock()
	if err != nil {
		return rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil)
	}
	return nil
}

func (e *engine) commitRead(*rdmap.Header, int) error {
	qp := e.qp
	qp.mu.Lock()
	ent, ok := e.orq.oldest()
	if ok {
		if !ent.rtr {
			w, _ := qp.sq.at(ent.sqCtr)
			w.done = true
		}
		e.orq.pop()
		qp.completeSQLocked()
	}
	qp.mu.Unlock()
	e.rx.readGot = 0
	e.sendSoon() // an ORD credit is free; fenced work may run
	return nil
}

func (e *engine) commitQueueRead(*rdmap.Header, int) error {
	qp := e.qp
	p := &e.rx.pend
	ent := p.irq
	p.irq = irqEntry{}
	ent.state = irqReady
	var hooks RegionHooks
	if ent.region != nil {
		if mr := extOf(ent.region); mr != nil && mr.hooks != nil {
			hooks, ent.state = mr.hooks, irqHeld
		}
	}
	ctr, gen, ok := e.queueInbound(ent, hooks != nil)
	// On the inbound queue (or released), where revoke finds it.
	e.endPlacing(ent.region)
	if !ok {
		return nil
	}
	if hooks != nil {
		hooks.ReadRequested(qp, ent.srcOff, len(ent.src), ReadRelease{inboundRelease{e: e, ctr: ctr, gen: gen}})
	}
	e.sendSoon()
	return nil
}

// queueInbound puts an inbound Read or Flush entry on the IRQ and counts
// it (held: a region's hooks will release it). A queue pair already in
// error takes nothing: the entry's region reference goes, and ok is false.
func (e *engine) queueInbound(ent irqEntry, held bool) (ctr, gen uint32, ok bool) {
	qp := e.qp
	qp.mu.Lock()
	if qp.state >= stateError {
		qp.mu.Unlock()
		if ent.region != nil {
			ent.region.ReleaseRemote()
		}
		return 0, 0, false
	}
	ctr, gen = e.irq.push(ent)
	qp.mu.Unlock()
	qp.stats.readsQueued.Add(1)
	if held {
		qp.stats.readsHeld.Add(1)
	}
	return ctr, gen, true
}

func (e *engine) commitTerminate(*rdmap.Header, int) error {
	te := e.rx.pend.term
	e.qp.stats.termRx.add(te.Code)
	e.blameTerminate(te)
	e.fail(te, nil)
	return errStop
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
		dst := r.buf[off : off+take]
		var err error
		if mr := extOf(r.region); mr != nil && (mr.mayFault || mr.watch != nil) {
			err = e.placeLocal(mr, dst)
		} else {
			err = e.rx.r.ReadFull(dst)
		}
		if err != nil {
			return err
		}
		if mr := extOf(r.region); mr != nil && mr.hooks != nil {
			mr.hooks.Placed(e.qp, int(r.off+off), int(take))
		}
		n -= int(take)
		off = 0
	}
	if n != 0 {
		return rdmap.NewError(rdmap.DDPLocalCatastrophic, nil, 0, nil)
	}
	return nil
}

// placeLocal reads into local memory of a watched or faultable region.
func (e *engine) placeLocal(mr *regionExt, dst []byte) error {
	if mr.watch != nil {
		buf := getStage()
		defer putStage(buf)
		b := (*buf)[:len(dst)]
		if err := e.rx.r.ReadFull(b); err != nil {
			return err
		}
		copyWatched(mr, dst, b)
		return nil
	}
	return guardFault(mr, func() error { return e.rx.r.ReadFull(dst) })
}

// openTx lets the transmitter send (the responder saw the initiator's
// first FPDU, or the initiator's first-FPDU delay has passed).
func (e *engine) openTx() {
	e.qp.mu.Lock()
	e.txOpen = true
	e.qp.mu.Unlock()
	e.qp.kick()
}

// receiveFailed ends the connection after the receive role stopped.
func (e *engine) receiveFailed(err error) {
	var coded termcode.Code
	if errors.Is(err, mpa.ErrCRC) {
		e.qp.stats.crcErrors.Add(1)
	}
	switch {
	case err == errStop:
	case e.dead.Load():
		// The connection ended elsewhere first (Close, Abort, a revocation
		// whose placement was not this one): this error is its echo.
	case errors.Is(err, io.EOF):
		e.fail(ErrPeerClosed, nil)
	case errors.Is(err, mpa.ErrConnectionLost):
		e.fail(connectionLost(err), nil)
	case errors.As(err, &coded):
		e.failTerminate(err)
	case e.revoking.Load() != nil:
		// An invalidation cut a read short just after this connection's
		// placement into the region ended: its Write raced with the
		// invalidation, and the stream cannot go on from a cut read.
		e.failTerminate(fmt.Errorf("%w: %w", rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), err))
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
