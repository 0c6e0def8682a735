package conn

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iwarp-go/iwarp-go/rdmap"
)

// Errors of shared receive queues.
var (
	ErrSRQFull   = errors.New("iwarp: shared receive queue full")
	ErrSRQClosed = errors.New("iwarp: shared receive queue closed")
	ErrSRQBusy   = errors.New("iwarp: shared receive queue still has queue pairs bound to it")
	// ErrQPUsesSRQ is QP.PostRecv on a queue pair created with QPCaps.SRQ:
	// its receives come from the shared receive queue only, as in verbs.
	ErrQPUsesSRQ = errors.New("iwarp: queue pair takes its receives from a shared receive queue; post to the SRQ")
)

// SRQCaps sizes a shared receive queue, like libibverbs' ibv_srq_attr
// (max_wr, max_sge). Zero fields take the defaults.
type SRQCaps struct {
	Depth  int // receive work requests posted at once (default 64)
	MaxSGE int // SGEs per receive work request (default 4)
}

// SRQ is a shared receive queue: the receives posted to it serve the Sends
// that arrive on any queue pair bound to it (QPCaps.SRQ), in posting order,
// whichever queue pair a Send arrives on. A server with many mostly idle
// connections posts its receive buffers once, sized for the traffic of all
// of them, instead of per connection. All methods are safe for concurrent
// use.
//
// A receive stays on the SRQ until a Send's first segment arrives on a
// bound queue pair; it then belongs to that queue pair, which reserves a
// slot on its receive CQ for it (see "Shared receive queues" in the
// package documentation) and completes it there: the completion's QPN says
// which queue pair the message came from. When a bound queue pair closes,
// only the receive its message in progress held is completed, with
// WCWRFlushErr on that queue pair's CQ; the others stay on the SRQ for the
// remaining queue pairs.
type SRQ struct {
	pd   *PD
	caps SRQCaps

	// mu guards everything below; see "Locks and ownership" in doc.go.
	mu     sync.Mutex
	q      recvQueue
	bound  int  // queue pairs bound and not yet closed
	closed bool // Close succeeded
	limit  int  // armed limit (0: not armed)

	limitc chan struct{} // capacity 1: the armed limit was reached
}

// NewSRQ creates a shared receive queue in pd. Queue pairs of pd bind to it
// at creation (QPCaps.SRQ); receives posted to it name regions of pd.
func (pd *PD) NewSRQ(caps SRQCaps) (*SRQ, error) {
	for _, f := range []struct {
		v        *int
		def, max int
		name     string
	}{
		{&caps.Depth, DefaultQueueDepth, MaxQueueDepth, "SRQ depth"},
		{&caps.MaxSGE, DefaultMaxSGE, MaxSGE, "SRQ SGEs"},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 1 || *f.v > f.max {
			return nil, badOption("%s %d: must be from 1 to %d", f.name, *f.v, f.max)
		}
	}
	return &SRQ{
		pd:     pd,
		caps:   caps,
		q:      newRecvQueue(caps.Depth, caps.MaxSGE),
		limitc: make(chan struct{}, 1),
	}, nil
}

// Caps returns the SRQ's sizes, defaults filled in.
func (s *SRQ) Caps() SRQCaps { return s.caps }

// Len returns the number of receives posted and not yet taken by a
// queue pair.
func (s *SRQ) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.len()
}

// PostRecv posts a receive buffer for one incoming Send on any queue pair
// bound to the SRQ. It fails with ErrSRQFull when Depth receives are
// posted. Unlike QP.PostRecv it reserves no completion-queue room: that
// happens when a queue pair takes the receive.
func (s *SRQ) PostRecv(wr RecvWR) error {
	s.mu.Lock()
	err := s.postLocked(&wr)
	s.mu.Unlock()
	return err
}

// PostRecvBatch posts several receives and returns how many were posted.
func (s *SRQ) PostRecvBatch(wrs []RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range wrs {
		if err := s.postLocked(&wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

func (s *SRQ) postLocked(wr *RecvWR) error {
	if s.closed {
		return ErrSRQClosed
	}
	if len(wr.SGL) > s.caps.MaxSGE {
		return fmt.Errorf("%w: %d SGEs, the shared receive queue takes %d", ErrInvalidWR, len(wr.SGL), s.caps.MaxSGE)
	}
	if s.q.full() {
		return ErrSRQFull
	}
	refs := s.q.free()
	n, err := s.pd.resolve(refs, wr.SGL, LocalWrite)
	if err != nil {
		return err
	}
	s.q.push(recvWQE{id: wr.ID, nsge: len(wr.SGL), length: n})
	return nil
}

// Arm arms the limit event (IBV_EVENT_SRQ_LIMIT_REACHED in verbs, armed by
// ibv_modify_srq's srq_limit): once fewer than limit receives are posted,
// LimitReached receives a value and the SRQ disarms. If fewer than limit
// are posted when Arm is called, it fires at once, so that a program that
// arms after checking Len cannot miss the event. Arm(0) disarms. limit
// may not exceed Depth.
func (s *SRQ) Arm(limit int) error {
	if limit < 0 || limit > s.caps.Depth {
		return badOption("SRQ limit %d: must be from 0 to the depth %d", limit, s.caps.Depth)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSRQClosed
	}
	s.limit = limit
	s.checkLimitLocked()
	return nil
}

// LimitReached returns the channel the armed limit event is delivered on.
// It holds at most one value: events that fire before the program
// receives the last one merge into it.
func (s *SRQ) LimitReached() <-chan struct{} { return s.limitc }

func (s *SRQ) checkLimitLocked() {
	if s.limit > 0 && s.q.len() < s.limit {
		s.limit = 0
		select {
		case s.limitc <- struct{}{}:
		default:
		}
	}
}

// Close destroys the SRQ. It fails with ErrSRQBusy while queue pairs that
// are not closed are bound to it (ibv_destroy_srq's EBUSY); otherwise it
// drops the receives still posted, releasing their regions (no queue pair
// is there to complete them on), and later posts fail with ErrSRQClosed.
// Closing a closed SRQ does nothing.
func (s *SRQ) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound > 0 {
		return fmt.Errorf("%w: %d queue pairs", ErrSRQBusy, s.bound)
	}
	s.closed = true
	s.limit = 0
	s.q.flushInError(func(*recvWQE, []sgeRef) {})
	return nil
}

// bind makes qp take its receives from s; called by NewQP.
func (s *SRQ) bind(qp *QP) (*srqBinding, error) {
	if s.pd != qp.pd {
		return nil, badOption("shared receive queue of another protection domain")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSRQClosed
	}
	s.bound++
	return &srqBinding{srq: s, qp: qp, refs: make([]sgeRef, s.caps.MaxSGE)}, nil
}

// unbind is called once the queue pair is closed, its work flushed.
func (s *SRQ) unbind() {
	s.mu.Lock()
	s.bound--
	s.mu.Unlock()
}

// srqBinding is a queue pair's receive source when it is bound to an SRQ:
// the receive its Send message in progress was taken into. It is guarded
// by QP.mu; the SRQ's lock is taken after it.
type srqBinding struct {
	srq  *SRQ
	qp   *QP
	held bool // w and refs hold a receive taken from the SRQ
	w    recvWQE
	refs []sgeRef
}

func (b *srqBinding) next() (*recvWQE, []sgeRef, error) {
	if !b.held {
		if err := b.srq.take(b); err != nil || !b.held {
			return nil, nil, err
		}
	}
	return &b.w, b.refs[:b.w.nsge], nil
}

// take moves the oldest posted receive into b, reserving its completion's
// slot on b's receive CQ. With none posted it leaves b empty (the Send
// finds no buffer); with the CQ full the receive stays on the SRQ and the
// error ends b's stream.
func (s *SRQ) take(b *srqBinding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.len() == 0 {
		return nil
	}
	if err := b.qp.rcq.reserve(1); err != nil {
		// A CQ overrun: the queue pair cannot complete the message, which
		// verbs reports as a fatal error of the queue pair (IBV_EVENT_CQ_ERR).
		return fmt.Errorf("%w: %w", rdmap.NewError(rdmap.RDMAPLocalCatastrophic, nil, 0, nil), err)
	}
	i := s.q.pos(s.q.head)
	b.w = s.q.wqe[i]
	src := s.q.sge.used(i, b.w.nsge)
	copy(b.refs, src)
	clear(src) // the references now belong to b
	s.q.wqe[i] = recvWQE{}
	s.q.head++
	b.held = true
	s.checkLimitLocked()
	return nil
}

func (b *srqBinding) pop() (recvWQE, error) {
	if !b.held {
		return recvWQE{}, errNoReceive
	}
	w := b.w
	b.release()
	return w, nil
}

func (b *srqBinding) flushInError(complete func(w *recvWQE, refs []sgeRef)) {
	if b.held {
		complete(&b.w, b.refs[:b.w.nsge])
		b.release()
	}
}

func (b *srqBinding) release() {
	releaseRefs(b.refs[:b.w.nsge])
	clear(b.refs)
	b.w = recvWQE{}
	b.held = false
}
