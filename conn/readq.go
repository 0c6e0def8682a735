package conn

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// reqKind is the kind of a request on untagged queue 1 (RFC 5040 RDMA Read
// Requests and the requests that share their queue, MSNs and IRD/ORD
// credits), in either direction: what its response is.
type reqKind uint8

const (
	reqRead   reqKind = iota // RDMA Read Request: an RDMA Read Response
	reqFlush                 // Flush Request: a Flush Response on QN 3
	reqAtomic                // RFC 7306 Atomic Request: an Atomic Response on QN 3
)

// orqEntry is an RDMA Read Request this side sent and whose response it
// expects. Its fields are set when the request is framed and do not change;
// how much of the response has arrived is receive state (rxState.readGot),
// owned by the receive token, since only the oldest entry receives.
type orqEntry struct {
	sqCtr    uint32 // send-queue counter of the Read work request
	msn      uint32 // of its Read Request (QN 1)
	kind     reqKind
	reqID    uint32 // a Flush or Atomic Request's ID
	rtr      bool   // an RFC 6581 Read RTR: no work request behind it
	sinkSTag uint32
	sinkTO   uint64
	size     uint32
}

// outboundReads is the outbound read queue (ORQ), bounded by the ORD in
// use. Guarded by QP.mu: the transmit token holder pushes, the receive
// token holder pops the head when its response is complete.
type outboundReads struct {
	ent        []orqEntry
	head, tail uint32
	limit      int
}

func newOutboundReads(limit int) outboundReads {
	limit = max(limit, 1) // the Read RTR needs a slot even when ORD is 0
	return outboundReads{ent: make([]orqEntry, limit), limit: limit}
}

func (q *outboundReads) outstanding() int { return int(q.tail - q.head) }
func (q *outboundReads) full() bool       { return q.outstanding() >= q.limit }

// oldest returns the entry whose response arrives next.
func (q *outboundReads) oldest() (*orqEntry, bool) {
	if q.head == q.tail {
		return nil, false
	}
	return &q.ent[slot(q.head, len(q.ent))], true
}

// use is what a request of kind k asks of the region it names: a Flush
// is checked, and reported, like a Read source.
func (k reqKind) use() remoteUse {
	if k == reqAtomic {
		return useAtomicTarget
	}
	return useReadSource
}

// matchResponse checks a response of queue 3 (a Flush or Atomic Response)
// against the oldest outstanding request of queue 1, which must be of kind
// k with the response's ID (responses come in request order, RFC 7306
// §5.2.1 items 6–7; an invalid one surfaces an error, §5.2.2 item 7): none
// or another kind is condition unexpected, another ID condition mismatch.
func (e *engine) matchResponse(k reqKind, id uint32, unexpected, mismatch rdmap.Condition, hdr []byte, n int) error {
	qp := e.qp
	qp.mu.Lock()
	ent, ok := e.orq.oldest()
	var want orqEntry
	if ok {
		want = *ent
	}
	qp.mu.Unlock()
	switch {
	case !ok || want.kind != k:
		return rdmap.NewError(unexpected, hdr, n, nil)
	case want.reqID != id:
		return rdmap.NewError(mismatch, hdr, n, nil)
	}
	return nil
}

func (q *outboundReads) push(e orqEntry) {
	q.ent[slot(q.tail, len(q.ent))] = e
	q.tail++
}

func (q *outboundReads) pop() {
	q.ent[slot(q.head, len(q.ent))] = orqEntry{}
	q.head++
}

// irqState is where an inbound Read Request is on its way to a response.
type irqState uint8

const (
	irqFree    irqState = iota
	irqHeld             // the region's hooks hold the response back (a persist first)
	irqReady            // may be sent, in request order
	irqSending          // the transmit token holder is framing its response
)

// irqEntry is a peer's request on queue 1 waiting for its response (an
// RDMA Read Request, or a request sharing its queue and IRD). It holds
// a remote reference on the region it reads (none for a zero-length Read),
// dropped once the response's bytes have been written to the socket (or
// the connection ended), so that invalidating the region can tell the
// memory is still in use.
type irqEntry struct {
	state irqState
	kind  reqKind
	// A Flush or Atomic Request's ID; a Flush Request's placement asked
	// for, the range's length, and (once released) what its response
	// reports; an Atomic Request's original value.
	reqID     uint32
	orig      uint64
	placement rdmap.Placement
	flushLen  uint64
	status    rdmap.FlushStatus
	achieved  rdmap.Placement
	gen       uint32 // tells a stale ReadRelease from the slot's current request
	err       error  // set by a ReadRelease with an error: end the stream instead
	region    *stag.Region
	src       []byte
	srcOff    int // of src in the region
	sinkSTag  uint32
	sinkTO    uint64
	// The request as received (DDP header and Read Request header), for a
	// Terminate about it.
	req [rdmap.ReadRequestHeaderLen]byte
}

// inboundRelease names a held entry of the inbound queue: what a region's
// hooks are handed to let its response go (ReadRelease, FlushRelease).
type inboundRelease struct {
	e        *engine
	ctr, gen uint32
}

// release lets the held entry go, once: outcome (if any) records what the
// response says, under QP.mu; a non-nil fail ends the connection instead,
// with a Terminate (RDMAP local catastrophic error) and fail as the reason.
// A stale release (the entry answered, the connection ended) does nothing.
// When the transmit token is free, the calling goroutine sends the
// response itself, without blocking.
func (r inboundRelease) release(kind reqKind, fail error, outcome func(*irqEntry)) {
	e := r.e
	if e == nil {
		return
	}
	qp := e.qp
	qp.mu.Lock()
	ent := e.irq.at(r.ctr)
	if ent.gen != r.gen || ent.state != irqHeld || ent.kind != kind || qp.state >= stateError {
		qp.mu.Unlock()
		return
	}
	if fail != nil {
		qp.mu.Unlock()
		e.failTerminate(fmt.Errorf("%w: %w", rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), fail))
		return
	}
	if outcome != nil {
		outcome(ent)
	}
	ent.state = irqReady
	qp.mu.Unlock()
	e.sendReleased()
}

// inboundReads is the inbound read queue (IRQ), bounded by the IRD this
// side advertised. Guarded by QP.mu. Responses go out in request order:
//
//	[head, next)  the response is being framed (at most one entry)
//	[next, tail)  queued: held or ready
//
// An entry leaves the queue (head advances, the IRD credit is free) when
// its response's last segment has been framed; its region reference moves
// to the transmitter's list of memory to release after the flush.
type inboundReads struct {
	ent              []irqEntry
	head, next, tail uint32
	limit            int
	gen              uint32
}

// The entries are allocated at the first Read, Atomic or Flush Request,
// so that a queue pair never asked to respond holds none.
func newInboundReads(limit int) inboundReads {
	return inboundReads{limit: limit}
}

func (q *inboundReads) outstanding() int { return int(q.tail - q.head) }
func (q *inboundReads) full() bool       { return q.outstanding() >= q.limit }
func (q *inboundReads) empty() bool      { return q.head == q.tail }
func (q *inboundReads) at(c uint32) *irqEntry {
	if q.ent == nil {
		q.ent = make([]irqEntry, max(q.limit, 1))
	}
	return &q.ent[slot(c, len(q.ent))]
}

// push queues a request; it returns its counter and generation.
func (q *inboundReads) push(e irqEntry) (uint32, uint32) {
	q.gen++
	e.gen = q.gen
	c := q.tail
	*q.at(c) = e
	q.tail++
	return c, e.gen
}

// ready reports whether the next response may start.
func (q *inboundReads) ready() bool {
	return q.next != q.tail && q.at(q.next).state == irqReady
}

// startNext marks the next entry as being sent and returns it.
func (q *inboundReads) startNext() (uint32, *irqEntry) {
	c := q.next
	q.next++
	e := q.at(c)
	e.state = irqSending
	return c, e
}

// finish frees the entry c whose last segment has been framed and returns
// the region reference it held, for release after the flush.
func (q *inboundReads) finish(c uint32) *stag.Region {
	e := q.at(c)
	r := e.region
	*e = irqEntry{}
	q.head = c + 1
	return r
}

// drop releases every entry's region reference and empties the queue
// (the connection has ended).
func (q *inboundReads) drop() {
	for c := q.head; c != q.tail; c++ {
		if e := q.at(c); e.region != nil {
			e.region.ReleaseRemote()
		}
		*q.at(c) = irqEntry{}
	}
	q.head, q.next = q.tail, q.tail
}

// uses reports whether a queued or sending response reads region r, and
// returns the first such request for a Terminate.
func (q *inboundReads) uses(r *stag.Region) (*irqEntry, bool) {
	for c := q.head; c != q.tail; c++ {
		if e := q.at(c); e.region == r {
			return e, true
		}
	}
	return nil, false
}
