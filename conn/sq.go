package conn

import "github.com/iwarp-go/iwarp-go/stag"

// sgeRef is an SGE resolved at post time: the bytes it names and the region
// whose reference the work request holds until it completes.
type sgeRef struct {
	region *stag.Region
	off    uint64 // offset of buf in the region
	buf    []byte
}

func releaseRefs(refs []sgeRef) {
	for i := range refs {
		if refs[i].region != nil {
			refs[i].region.Release()
		}
		refs[i] = sgeRef{}
	}
}

// sgeSlots is the SGE storage of a ring of work requests: per SGEs for
// each slot, allocated once, at the first post: most of what a queue pair
// that has never posted would otherwise hold (docs/performance.md, "What an
// idle queue pair holds").
type sgeSlots struct {
	refs       []sgeRef
	slots, per int
}

func newSGESlots(slots, per int) sgeSlots {
	return sgeSlots{slots: slots, per: per}
}

// all returns slot i's storage, for resolving a new work request into.
func (s *sgeSlots) all(i int) []sgeRef {
	if s.refs == nil {
		s.refs = make([]sgeRef, s.slots*s.per)
	}
	return s.refs[i*s.per : (i+1)*s.per]
}

// used returns the first n SGEs of slot i.
func (s *sgeSlots) used(i, n int) []sgeRef { return s.refs[i*s.per : i*s.per+n] }

// slot returns the ring position of counter n in a ring of size len.
func slot(n uint32, size int) int { return int(n % uint32(size)) }

type sendWQE struct {
	id       uint64
	op       Op
	wc       WCOpcode // the opcode its completion reports
	flags    SendFlags
	nsge     int
	length   int
	remote   RemoteAddr
	invSTag  stag.STag
	msn      uint32 // of a Send or Read Request, once framed
	flushLen uint64
	imm      uint64     // OpWriteImm, OpSendImm
	atomic   AtomicArgs // OpFetchAdd, OpCmpSwap
	bind     *bindWR    // OpBindMW
	wcFlags  WCFlags    // for its completion
	done     bool
	status   WCStatus
	err      error
}

// sendQueue is the ring of send work requests. It is guarded by QP.mu.
// Counters run freely and wrap; head ≤ next ≤ tail in ring order:
//
//	[head, next)  started (framed or waiting for a response), not completed
//	[next, tail)  posted, not started
//
// The ring and its SGE storage are allocated at the first post (free), so
// that a queue pair which never sends holds neither.
type sendQueue struct {
	wqe              []sendWQE
	sge              sgeSlots
	depth            int
	head, next, tail uint32
}

func newSendQueue(depth, maxSGE int) sendQueue {
	return sendQueue{depth: depth, sge: newSGESlots(depth, maxSGE)}
}

func (q *sendQueue) len() int           { return int(q.tail - q.head) }
func (q *sendQueue) full() bool         { return q.len() == q.depth }
func (q *sendQueue) idle() bool         { return q.next == q.tail }
func (q *sendQueue) empty() bool        { return q.head == q.tail }
func (q *sendQueue) pos(ctr uint32) int { return slot(ctr, q.depth) }

// at returns the work request with counter ctr and its SGEs.
func (q *sendQueue) at(ctr uint32) (*sendWQE, []sgeRef) {
	q.alloc() // a hostile peer's response may name a slot before any post
	i := q.pos(ctr)
	w := &q.wqe[i]
	return w, q.sge.used(i, w.nsge)
}

// free returns the SGE storage of the next free slot, allocating the ring
// at the first post.
func (q *sendQueue) free() []sgeRef {
	q.alloc()
	return q.sge.all(q.pos(q.tail))
}

func (q *sendQueue) alloc() {
	if q.wqe == nil {
		q.wqe = make([]sendWQE, q.depth)
		q.sge.all(0)
	}
}

// push appends w, whose SGEs were resolved into free().
func (q *sendQueue) push(w sendWQE) {
	q.wqe[q.pos(q.tail)] = w
	q.tail++
}

// peekNext returns the next work request to start; the queue must not be
// idle.
func (q *sendQueue) peekNext() *sendWQE { return &q.wqe[q.pos(q.next)] }

// start moves the next work request into the started range.
func (q *sendQueue) start() (ctr uint32, w *sendWQE, refs []sgeRef) {
	ctr = q.next
	q.next++
	w, refs = q.at(ctr)
	return ctr, w, refs
}

// popDone removes completed work requests from the head, in posting order,
// handing each to complete before its slot is cleared.
func (q *sendQueue) popDone(complete func(w *sendWQE, refs []sgeRef)) {
	for q.head != q.next {
		w, refs := q.at(q.head)
		if !w.done {
			return
		}
		complete(w, refs)
		*w = sendWQE{}
		q.head++
	}
}

// flushInError removes every work request; those not done get status and err.
func (q *sendQueue) flushInError(status WCStatus, err error, complete func(w *sendWQE, refs []sgeRef)) {
	for q.head != q.tail {
		w, refs := q.at(q.head)
		if !w.done {
			w.status, w.err = status, err
		}
		complete(w, refs)
		*w = sendWQE{}
		q.head++
	}
	q.next = q.tail
}
