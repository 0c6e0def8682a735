// Package waiter hands a program the completions of one completion queue as
// it waits for them, and tells it when the connection ended with nothing
// left to complete.
//
// Every program of iwarp-peer waits for completions the same way: poll the
// CQ; if it is empty, wait for it in CQ.Wait (which receives for the CQ's
// only queue pair itself), until the context ends or the queue pair is
// done. A queue pair that leaves the connected state flushes its
// outstanding work into the CQ, but Done may close before those completions
// are pushed; a waiter that finds the CQ empty after Done reports ErrEnded
// rather than waiting for completions that may never come (work that was
// never posted, such as the receive a program waits to post).
package waiter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// ErrEnded is returned (wrapped together with the queue pair's Err) when the
// queue pair is done and its CQ holds nothing more.
var ErrEnded = errors.New("connection ended")

// Ended reports whether err says the connection is over: ErrEnded, or a
// work request flushed because the queue pair left the connected state.
// For a server that is how a session normally ends: the client closed.
func Ended(err error) bool {
	return errors.Is(err, ErrEnded) || errors.Is(err, conn.ErrFlushed)
}

// Waiter waits for the completions of one CQ on behalf of one queue pair.
// It is not safe for concurrent use.
type Waiter struct {
	cq    *conn.CQ
	qp    *conn.QP
	buf   []conn.WorkCompletion
	queue []conn.WorkCompletion // polled, not yet handed out, oldest first

	// The context CQ.Wait gets: the caller's, ended also when the queue
	// pair is done. It is kept for as long as the caller passes the same
	// context, so that waiting allocates nothing.
	waitFrom context.Context
	waitCtx  context.Context
	waitStop func()
}

// batch is how many completions one poll of the CQ takes.
const batch = 64

// New returns a waiter for the completions of cq, which belong to qp.
func New(cq *conn.CQ, qp *conn.QP) *Waiter {
	return &Waiter{cq: cq, qp: qp, buf: make([]conn.WorkCompletion, batch), queue: make([]conn.WorkCompletion, 0, batch)}
}

// Poll returns every completion that is ready, waiting for at least one.
// The slice is valid until the next call. If one of them is unsuccessful,
// Poll returns its error (a *conn.CompletionError) and no completions.
// In steady state Poll allocates nothing.
func (w *Waiter) Poll(ctx context.Context) ([]conn.WorkCompletion, error) {
	var wcs []conn.WorkCompletion
	if len(w.queue) > 0 {
		wcs = append(w.buf[:0], w.queue...)
		w.queue = w.queue[:0]
	} else {
		n, err := w.poll(ctx)
		if err != nil {
			return nil, err
		}
		wcs = w.buf[:n]
	}
	for i := range wcs {
		if err := wcs[i].Err(); err != nil {
			return nil, err
		}
	}
	return wcs, nil
}

// Next returns the oldest completion, waiting for one. An unsuccessful
// completion is returned with its error.
func (w *Waiter) Next(ctx context.Context) (conn.WorkCompletion, error) {
	for len(w.queue) == 0 {
		if err := w.fill(ctx); err != nil {
			return conn.WorkCompletion{}, err
		}
	}
	wc := w.queue[0]
	w.queue = append(w.queue[:0], w.queue[1:]...)
	return wc, wc.Err()
}

// WaitFor returns the oldest completion of kind op, waiting for one.
// Completions of other kinds stay queued, in order, for a later call: a
// program waiting for its reply does not lose the completion of its own
// Send. An unsuccessful completion of any kind is returned at once, with
// its error.
func (w *Waiter) WaitFor(ctx context.Context, op conn.WCOpcode) (conn.WorkCompletion, error) {
	for {
		for i, wc := range w.queue {
			if wc.Status != conn.WCSuccess || wc.Op == op {
				w.queue = append(w.queue[:i], w.queue[i+1:]...)
				return wc, wc.Err()
			}
		}
		if err := w.fill(ctx); err != nil {
			return conn.WorkCompletion{}, err
		}
	}
}

// fill waits for completions and queues them.
func (w *Waiter) fill(ctx context.Context) error {
	n, err := w.poll(ctx)
	if err == nil {
		w.queue = append(w.queue, w.buf[:n]...)
	}
	return err
}

// poll waits for at least one completion and returns how many it put into
// w.buf. It waits in CQ.Wait, which receives for a CQ's only queue pair in
// the waiting goroutine, so that a reply wakes this goroutine directly
// rather than the queue pair's receiver goroutine and then this one.
func (w *Waiter) poll(ctx context.Context) (int, error) {
	for {
		if n := w.cq.Poll(w.buf); n > 0 {
			return n, nil
		}
		select {
		case <-w.qp.Done():
			if n := w.cq.Poll(w.buf); n > 0 {
				return n, nil
			}
			if cause := w.qp.Err(); cause != nil {
				return 0, fmt.Errorf("%w: %w", ErrEnded, cause)
			}
			return 0, ErrEnded
		default:
		}
		if n, _ := w.cq.Wait(w.contextFor(ctx), w.buf); n > 0 {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// The queue pair is done: the select above says how it ended.
	}
}

// contextFor returns ctx, ended also when the queue pair is done.
func (w *Waiter) contextFor(ctx context.Context) context.Context {
	// A context of an uncomparable type (a struct holding a map, say)
	// would make == panic: such a caller gets a new context each time.
	if w.waitCtx != nil && reflect.TypeOf(ctx).Comparable() && w.waitFrom == ctx {
		return w.waitCtx
	}
	if w.waitStop != nil {
		w.waitStop()
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(doneContext{w.qp.Done()}, cancel)
	w.waitFrom, w.waitCtx = ctx, wctx
	w.waitStop = func() { stop(); cancel() }
	return wctx
}

// doneContext is a context that ends when done is closed.
type doneContext struct{ done <-chan struct{} }

func (doneContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c doneContext) Done() <-chan struct{}     { return c.done }
func (doneContext) Value(any) any               { return nil }
func (c doneContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
