package conn

import (
	"context"
	"errors"
	"os"
	"time"
)

// Receiving in CQ.Wait. A goroutine blocked in CQ.Wait for the only queue
// pair of its CQ runs the receive loop itself: it takes the receive token
// and waits on the socket, so that the peer's reply wakes it directly —
// one goroutine wake-up per round trip, as over a plain TCP connection,
// instead of the receiver's and then the waiter's. While waiters keep
// receiving, the receiver goroutine stands by; once no Wait has begun for
// a tick of the stand-by set (standby.go) it takes the socket back.
//
// A round trip touches no timer. The Wait's socket wait has no deadline:
// what must end it early does so with a poke (a read deadline in the
// past) — a completion another goroutine pushed, or the Wait's context
// ending, through a context.AfterFunc registered once per context, not
// per Wait; the stand-by set's one timer serves every connection of the
// process, and wakes no receiver while Waits are at work. Timer operations
// per round trip were measured: two read deadlines per Wait cost 2–3 % of
// the round trip, and every timer moved later wakes an idle thread to
// watch it (the Go runtime's wakeNetPoller), which cost more than the
// deadlines did.

// noteWait records that a CQ.Wait began for the connection. A plain load
// first: a Wait per round trip finds the flag set all but once per
// stand-by tick, and a load costs less than a store to a line the ticks
// read (or a clock reading, which it replaced).
func (e *engine) noteWait() {
	if !e.waitBegan.Load() {
		e.waitBegan.Store(true)
	}
}

// waitersReceive reports whether a CQ.Wait began for the connection since
// the receiver goroutine or a stand-by tick last looked, and clears the
// mark.
func (e *engine) waitersReceive() bool {
	return e.waitBegan.Load() && e.waitBegan.Swap(false)
}

// standByFor is the receiver goroutine's part while waiters receive: it
// lets go of the receive token and joins the stand-by set (standby.go),
// whose ticks wake it once no Wait has begun for a tick and none holds the
// socket; a waiter that hands the socket back wakes it at once. Woken, it
// takes the token only with TryLock and stands by on if a waiter has it:
// a goroutine blocked in Lock would be woken by every waiter's Unlock only
// to find the next Wait's TryLock ahead of it (a wake-up per round trip,
// and after a millisecond the mutex's starvation mode hands the token to
// it and takes it from the waiters). Only once the connection has ended
// does it wait for the holder, which then lets go at once.
func (e *engine) standByFor() {
	// A hand-back sent while this goroutine held the token is stale.
	select {
	case <-e.resume:
	default:
	}
	e.rxUnlock()
	// Wake a waiter that looked while this goroutine still held the token.
	e.qp.scq.wake()
	e.qp.rcq.wake()
	standBys.add(e)
	defer standBys.remove(e)
	for {
		select {
		case <-e.resume:
			e.wokenRx.Add(1)
			if e.rxMu.TryLock() {
				return
			}
		case <-e.qp.done:
			e.rxMu.Lock()
			return
		}
	}
}

// watchContext makes sure the ending of ctx cuts the holder's socket wait
// short: a context.AfterFunc that pokes, registered once per context (by
// its Done channel, which contexts can always be compared by) and dropped
// when another takes its place or the receive role ends. A context that
// never ends needs none. The caller holds the receive token, which owns
// the registration.
func (e *engine) watchContext(ctx context.Context) {
	done := ctx.Done()
	if done == nil || done == e.waitDone {
		return
	}
	e.unwatchContext()
	e.waitDone = done
	e.waitStop = context.AfterFunc(ctx, e.poke)
}

// unwatchContext drops the registration of watchContext, if any.
func (e *engine) unwatchContext() {
	if e.waitStop != nil {
		e.waitStop()
		e.waitStop, e.waitDone = nil, nil
	}
}

// The receive token holder's wait between FPDUs, as poke sees it.
const (
	awaitNone int32 = iota // not waiting
	awaitOn                // waiting: a poke cuts the wait
	awaitCut               // a poke cut it (its deadline is set, or being set)
)

// startAwait marks the receive token holder as waiting between FPDUs, so
// that poke may cut the wait short. It reports false, and marks nothing,
// when a completion was pushed since the last look at the CQ (the holder
// clears poked just before it looks): that completion is there to take,
// not to wait past. poked and await are sequentially consistent atomics:
// either this sees the poke or the poke sees the mark.
func (e *engine) startAwait() bool {
	e.await.Store(awaitOn)
	if e.poked.Load() {
		e.endAwait()
		return false
	}
	return true
}

// endAwait unmarks the wait, reporting whether a poke cut it short; the
// cut's deadline, in the past, is cleared. A wait no poke reached costs
// one compare-and-swap. After a cut, taking pokeMu waits until the poke
// has set its deadline, so that the clearing always follows it: a poke
// never reaches a read in the middle of an FPDU.
func (e *engine) endAwait() (cut bool) {
	if e.await.CompareAndSwap(awaitOn, awaitNone) {
		return false
	}
	e.pokeMu.Lock()
	e.await.Store(awaitNone)
	e.pokeMu.Unlock()
	e.c.SetReadDeadline(time.Time{})
	return true
}

// poke tells the receive token holder of a waiting CQ that a completion
// was pushed: it cuts short the holder's wait between FPDUs, if it is
// waiting, or the one it is about to start. The holder's own pushes come
// here too, and cost two atomics.
func (e *engine) poke() {
	e.poked.Store(true)
	if e.await.Load() != awaitOn {
		return
	}
	e.pokeMu.Lock()
	if e.await.CompareAndSwap(awaitOn, awaitCut) {
		e.c.SetReadDeadline(pastDeadline)
	}
	e.pokeMu.Unlock()
}

var pastDeadline = time.Unix(1, 0)

// receiveFor runs the receive loop in a goroutine waiting on cq until cq
// holds a completion, ctx ends, or the connection fails. ok is false when
// the caller should wait the usual way: the receive token was taken (the
// receiver goroutine is reading, or another waiter is), the connection
// ended (its flushed completions come the usual way), the next FPDU is a
// long one, or the connection cannot be poked (its net.Conn has no
// deadlines).
func (e *engine) receiveFor(ctx context.Context, cq *CQ, wcs []WorkCompletion) (n int, err error, ok bool) {
	e.noteWait() // the receiver stands by when it next looks
	if !e.rxMu.TryLock() {
		return 0, nil, false
	}
	cq.waiting.Store(e)
	back := false
	defer func() {
		cq.waiting.Store(nil)
		if standBys.parked.Load() {
			standBys.restart() // the ticks stopped while this Wait held the socket
		}
		e.rxUnlock()
		if back {
			// After the unlock, so that the receiver goroutine finds the
			// token free.
			e.handBack()
		}
	}()
	n, ok, back, err = e.receiveLocked(ctx, cq, wcs)
	return n, err, ok
}

// receiveLocked is receiveFor's loop, run with the receive token held; back
// reports that the socket goes back to the receiver goroutine (ok is then
// false).
func (e *engine) receiveLocked(ctx context.Context, cq *CQ, wcs []WorkCompletion) (n int, ok, back bool, err error) {
	if !e.pokeable() {
		return 0, false, true, nil
	}
	for {
		e.poked.Store(false) // what a poke until now pushed, Poll finds
		if n := cq.Poll(wcs); n > 0 {
			return n, true, false, nil
		}
		if e.dead.Load() {
			return 0, false, false, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, true, false, err
		}
		if !e.rx.r.Whole() {
			e.watchContext(ctx)
			if !e.startAwait() {
				continue // a completion came, or ctx ended: look again
			}
			whole, err := e.rx.r.AwaitFPDU(waitRxMaxFPDU)
			cut := e.endAwait()
			switch {
			case err == nil && !whole:
				// A long FPDU: the receiver goroutine places its
				// payload straight from the socket.
				return 0, false, true, nil
			case err == nil:
			case !errors.Is(err, os.ErrDeadlineExceeded):
				e.receiveFailed(err)
				continue
			case cut:
				continue // look again
			default:
				// A deadline not a poke's (a graceful close's, or
				// a revocation's): the receiver goroutine sorts it out.
				return 0, false, true, nil
			}
		}
		// The FPDU is buffered: nothing below waits for the peer.
		if err := e.receiveOne(); err != nil {
			e.receiveFailed(err)
			continue
		}
		e.waitRx.Add(1)
	}
}

// pokeable reports whether the connection's reads can be cut short by a
// deadline, which a Wait receiving needs; it finds out once. The caller
// holds the receive token.
func (e *engine) pokeable() bool {
	if e.deadlines == 0 {
		e.deadlines = 1
		if e.c.SetReadDeadline(time.Time{}) != nil {
			e.deadlines = -1
		}
	}
	return e.deadlines > 0
}

// waitRxMaxFPDU is the longest FPDU a waiter receives itself. Longer ones
// are left to the receiver goroutine, whose reads put payload straight
// into place rather than through the Reader's buffer, and from which a
// peer that stalls inside a long FPDU cannot keep a Wait past its context.
const waitRxMaxFPDU = 4096 + 64

// handBack returns the socket to the receiver goroutine at once; the
// caller has let go of the receive token.
func (e *engine) handBack() {
	e.waitBegan.Store(false)
	e.wakeReceiver()
}
