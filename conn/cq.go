package conn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrCQFull is returned when work is posted to a queue pair whose completion
// queue could not hold that work's completion. Capacity is reserved when work
// is posted, as verbs programs size their CQs, so that the goroutine that
// reads from the network never waits for the application to poll.
var ErrCQFull = errors.New("iwarp: completion queue has no room for the work's completion")

// CQ is a completion queue. Completions of any number of queue pairs may be
// directed to one CQ. All methods are safe for concurrent use.
type CQ struct {
	mu         sync.Mutex
	ring       []WorkCompletion
	head       int // oldest completion
	count      int // completions in the ring
	solPending int // solicited or unsuccessful completions in the ring
	// used is count plus the slots promised to posted work that has not
	// completed. It is an atomic beside mu so that posting and unsignaled
	// completion (a reservation each, two per message) take no lock: a
	// push turns a promised slot into a held one and leaves it unchanged.
	used atomic.Int64

	ready chan struct{} // capacity 1: a completion was pushed
	sol   chan struct{} // capacity 1: a solicited or error completion was pushed

	handler func(*WorkCompletion) // set: completions are handed to it, not queued

	// Receiving in Wait (waitrx.go). qps and only are guarded by mu; only
	// is also published for Wait's lock-free look.
	qps     []*engine              // connected queue pairs that complete here
	only    atomic.Pointer[engine] // qps[0] when it is the only one
	waiting atomic.Pointer[engine] // whose receive loop a Wait runs now
}

// CQOption configures NewCQ.
type CQOption func(*CQ)

// WithCompletionHandler makes the CQ hand every completion to h instead of
// queueing it (Poll and Wait then find nothing). h runs in the goroutine
// that completed the work — a queue pair's receiver for receives and RDMA
// Reads, its transmitter or the posting goroutine for Sends and Writes —
// with no lock of the library held, so it may post work; it must not
// block, and it must be safe for concurrent use when several queue pairs
// share the CQ. Completions of one queue pair reach h one at a time and in
// order. The WorkCompletion is valid only during the call.
//
// This is the event-driven way to use a CQ: a program that answers each
// message from the handler has no goroutine hand-off between the network
// and its code, which is most of a small round trip's latency.
func WithCompletionHandler(h func(*WorkCompletion)) CQOption {
	return func(cq *CQ) { cq.handler = h }
}

// NewCQ returns a completion queue that holds up to depth completions:
// work can be outstanding on it (posted and not yet polled) for at most
// depth work requests. It panics if depth is not positive.
func NewCQ(depth int, opts ...CQOption) *CQ {
	if depth <= 0 {
		panic("iwarp: NewCQ: depth must be positive")
	}
	cq := &CQ{
		ring:  make([]WorkCompletion, depth),
		ready: make(chan struct{}, 1),
		sol:   make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(cq)
	}
	return cq
}

// Cap returns the number of completions the queue can hold.
func (cq *CQ) Cap() int { return len(cq.ring) }

// Len returns the number of completions waiting to be polled.
func (cq *CQ) Len() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.count
}

// reserve promises n completion slots to work being posted.
func (cq *CQ) reserve(n int) error {
	for {
		u := cq.used.Load()
		if u+int64(n) > int64(len(cq.ring)) {
			return ErrCQFull
		}
		if cq.used.CompareAndSwap(u, u+int64(n)) {
			return nil
		}
	}
}

// unreserve gives back slots of work that completed without a completion
// (unsignaled work that succeeded) or that was never queued.
func (cq *CQ) unreserve(n int) { cq.used.Add(-int64(n)) }

// push stores a completion in a slot reserved earlier. It never blocks.
func (cq *CQ) push(wc *WorkCompletion) {
	cq.mu.Lock()
	if cq.used.Load() <= int64(cq.count) || cq.count == len(cq.ring) {
		cq.mu.Unlock()
		panic("iwarp: completion pushed without a reserved slot")
	}
	i := cq.head + cq.count
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = *wc
	cq.count++
	notifySol := wc.Status != WCSuccess || wc.Flags&WCSolicited != 0
	if notifySol {
		cq.solPending++
	}
	cq.mu.Unlock()
	cq.wake()
	if e := cq.waiting.Load(); e != nil {
		e.poke()
	}
	if notifySol {
		select {
		case cq.sol <- struct{}{}:
		default:
		}
	}
}

// Poll moves up to len(wcs) completions, oldest first, into wcs and returns
// how many it moved. It never blocks and does not allocate.
func (cq *CQ) Poll(wcs []WorkCompletion) int {
	cq.mu.Lock()
	n := cq.pollLocked(wcs)
	cq.mu.Unlock()
	return n
}

func (cq *CQ) pollLocked(wcs []WorkCompletion) int {
	n := min(len(wcs), cq.count)
	for k := 0; k < n; k++ {
		slot := &cq.ring[cq.head]
		wcs[k] = *slot
		if slot.Status != WCSuccess || slot.Flags&WCSolicited != 0 {
			cq.solPending--
		}
		*slot = WorkCompletion{} // drop the error reference
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
	}
	cq.count -= n
	cq.used.Add(-int64(n))
	return n
}

// Wait blocks until at least one completion is available or ctx is done, then
// behaves like Poll.
//
// When the CQ serves a single connected queue pair without completion
// handlers, Wait receives for it: it reads the socket itself, so that the
// peer's reply wakes the waiting goroutine directly rather than the queue
// pair's receiver goroutine and then the waiter — half the goroutine
// wake-ups of a round trip (BenchmarkPingPong's ctxsw/op). It does so only
// for FPDUs of up to about 4 KiB (longer ones are placed by the receiver
// straight from the socket); it sets no timer per call, and ctx's end cuts
// its socket wait short. After the last Wait, the receiver goroutine takes
// the socket back within about 30 ms, so that a program that stops
// waiting still has Read Requests answered and Writes placed. Region
// hooks may run in the goroutine calling Wait.
func (cq *CQ) Wait(ctx context.Context, wcs []WorkCompletion) (int, error) {
	if len(wcs) == 0 {
		return 0, errors.New("iwarp: CQ.Wait: empty completion slice")
	}
	for {
		if n := cq.Poll(wcs); n > 0 {
			return n, nil
		}
		if e := cq.only.Load(); e != nil && !e.qp.handlers {
			if n, err, ok := e.receiveFor(ctx, cq, wcs); ok {
				return n, err
			}
		}
		select {
		case <-cq.ready:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// wake signals Ready (and so Wait) without blocking.
func (cq *CQ) wake() {
	select {
	case cq.ready <- struct{}{}:
	default:
	}
}

// attach and detach keep the list of connected queue pairs completing on
// the CQ, so that Wait knows when it may run the receive loop of the only
// one. A queue pair whose send and receive CQ are one attaches once.
func (cq *CQ) attach(e *engine) {
	cq.mu.Lock()
	if !slices.Contains(cq.qps, e) {
		cq.qps = append(cq.qps, e)
	}
	cq.publishLocked()
	cq.mu.Unlock()
}

func (cq *CQ) detach(e *engine) {
	cq.mu.Lock()
	if i := slices.Index(cq.qps, e); i >= 0 {
		cq.qps = slices.Delete(cq.qps, i, i+1)
	}
	cq.publishLocked()
	cq.mu.Unlock()
}

func (cq *CQ) publishLocked() {
	if len(cq.qps) == 1 {
		cq.only.Store(cq.qps[0])
	} else {
		cq.only.Store(nil)
	}
}

// WaitSolicited blocks until the queue holds a solicited completion (a
// received Send with Solicited Event) or an unsuccessful one, or ctx is done;
// then it polls like Poll, returning the oldest completions first (which may
// include unsolicited ones queued before). This is the verbs
// "notify on solicited only" pattern.
func (cq *CQ) WaitSolicited(ctx context.Context, wcs []WorkCompletion) (int, error) {
	if len(wcs) == 0 {
		return 0, errors.New("iwarp: CQ.WaitSolicited: empty completion slice")
	}
	for {
		cq.mu.Lock()
		if cq.solPending > 0 {
			n := cq.pollLocked(wcs)
			cq.mu.Unlock()
			return n, nil
		}
		cq.mu.Unlock()
		select {
		case <-cq.sol:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Ready returns a channel that receives a value after completions are
// pushed. It is level-triggered in the sense that matters for select loops:
// after a receive from Ready, a Poll sees every completion pushed before the
// signal. Use it to wait on several CQs or other events at once:
//
//	for {
//		if n := cq.Poll(wcs); n > 0 { ... }
//		select { case <-cq.Ready(): case <-other: }
//	}
func (cq *CQ) Ready() <-chan struct{} { return cq.ready }
