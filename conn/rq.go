package conn

import "errors"

type recvWQE struct {
	id     uint64
	nsge   int
	length int
}

// recvSource supplies the buffers that incoming Sends are placed into. A
// queue pair's own receive queue is one; a shared receive queue's binding
// (srqBinding) is the other, consumed by several queue pairs.
//
// Every method is called with QP.mu held (for a shared source: with the
// source's own lock taken inside the method, after QP.mu).
type recvSource interface {
	// next returns the receive the message in progress goes into, without
	// removing it; w is nil when none is posted. An error (a shared
	// source's receive CQ is full) ends the stream.
	next() (w *recvWQE, refs []sgeRef, err error)
	// pop removes the receive next returned, once its message completed.
	// It fails, changing nothing, when there is none.
	pop() (recvWQE, error)
	// flushInError removes every receive, handing each to complete.
	flushInError(complete func(w *recvWQE, refs []sgeRef))
}

// errNoReceive is a pop that found nothing: the engine's bookkeeping went
// wrong. It ends the stream with a local catastrophic error instead of
// corrupting the queue.
var errNoReceive = errors.New("iwarp: internal error: a receive completed with none posted")

// recvQueue is a queue pair's own receive queue, guarded by QP.mu. Like
// the send queue's, its ring is allocated at the first post.
type recvQueue struct {
	wqe        []recvWQE
	sge        sgeSlots
	depth      int
	head, tail uint32 // oldest posted (being filled), next free
}

func newRecvQueue(depth, maxSGE int) recvQueue {
	return recvQueue{depth: depth, sge: newSGESlots(depth, maxSGE)}
}

func (q *recvQueue) len() int         { return int(q.tail - q.head) }
func (q *recvQueue) full() bool       { return q.len() == q.depth }
func (q *recvQueue) pos(c uint32) int { return slot(c, q.depth) }

// free returns the SGE storage of the next free slot, allocating the ring
// at the first post.
func (q *recvQueue) free() []sgeRef {
	if q.wqe == nil {
		q.wqe = make([]recvWQE, q.depth)
	}
	return q.sge.all(q.pos(q.tail))
}

func (q *recvQueue) push(w recvWQE) {
	q.wqe[q.pos(q.tail)] = w
	q.tail++
}

func (q *recvQueue) next() (*recvWQE, []sgeRef, error) {
	if q.len() == 0 {
		return nil, nil, nil
	}
	i := q.pos(q.head)
	return &q.wqe[i], q.sge.used(i, q.wqe[i].nsge), nil
}

func (q *recvQueue) pop() (recvWQE, error) {
	if q.len() == 0 {
		return recvWQE{}, errNoReceive
	}
	i := q.pos(q.head)
	w := q.wqe[i]
	releaseRefs(q.sge.used(i, w.nsge))
	q.wqe[i] = recvWQE{}
	q.head++
	return w, nil
}

func (q *recvQueue) flushInError(complete func(w *recvWQE, refs []sgeRef)) {
	for q.len() > 0 {
		i := q.pos(q.head)
		complete(&q.wqe[i], q.sge.used(i, q.wqe[i].nsge))
		releaseRefs(q.sge.used(i, q.wqe[i].nsge))
		q.wqe[i] = recvWQE{}
		q.head++
	}
}
