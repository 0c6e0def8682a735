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
// receiving, the receiver goroutine stands by; when no Wait has received
// for standByInterval, or a Wait found the socket silent for about that
// long, it takes the socket back. No goroutine spins, and while Waits keep
// coming nothing wakes on a timer: the waiters push the receiver's timer
// forward (every half interval, not every Wait) and leave their socket
// deadline in place from one Wait to the next (standByDeadline), so that a
// round trip sets no timer at all. A waiter wakes at most once before it
// leaves the socket to the receiver goroutine, which then blocks in the
// read.

// standByInterval is how long the receiver goroutine leaves the socket to
// CQ.Wait after the last Wait that received, and about how long a Wait
// waits on a silent socket before it hands the socket back.
const standByInterval = time.Millisecond

// waitersReceive reports whether a CQ.Wait received for the connection
// recently enough that the receiver goroutine should leave it the socket.
func (e *engine) waitersReceive() bool {
	last := e.lastWait.Load()
	return last != 0 && nanotime()-last < int64(standByInterval)
}

// standByFor is the receiver goroutine's part while waiters receive: it
// lets go of the receive token and takes it back once no Wait has
// received for standByInterval, or when a waiter hands the socket back.
// It never blocks on the token while a waiter holds it: a goroutine
// blocked in Lock would be woken by every waiter's Unlock only to find the
// next Wait's TryLock ahead of it (a wake-up per round trip, and after a
// millisecond the mutex's starvation mode hands the token to it and takes
// it from the waiters). If the token is taken when the pause ends, it
// pauses again; only once the connection has ended does it wait for the
// holder, which then lets go at once.
func (e *engine) standByFor() {
	if e.standBy == nil {
		// Made while this goroutine holds the token, so that waiters,
		// which touch it only holding the token, always see it.
		e.standBy = time.NewTimer(standByInterval)
		e.standBy.Stop()
	}
	e.rxUnlock()
	// Wake a waiter that looked while this goroutine still held the token.
	e.qp.scq.wake()
	e.qp.rcq.wake()
	for {
		if e.standByPause() {
			e.rxMu.Lock()
			return
		}
		if !e.waitersReceive() && e.rxMu.TryLock() {
			return
		}
	}
}

// standByPause is one pause of standByFor, until standByInterval after the
// last Wait that received (waiters push it later as they go on); it
// reports whether the queue pair has left the connected states.
func (e *engine) standByPause() (over bool) {
	d := standByInterval
	if last := e.lastWait.Load(); last != 0 {
		if left := time.Duration(last + int64(standByInterval) - nanotime()); left > 0 {
			d = left
		}
	}
	e.standBy.Reset(d)
	select {
	case <-e.standBy.C:
	case <-e.resume:
		e.standBy.Stop()
	case <-e.qp.done:
		e.standBy.Stop()
		return true
	}
	return false
}

// pushStandBy moves the standing-by receiver's wake-up to standByInterval
// from now, at most once every half interval: a Wait that receives keeps
// the receiver asleep without a timer operation per round trip. The
// caller holds the receive token.
func (e *engine) pushStandBy(now int64) {
	if e.standBy != nil && now-e.standByAt >= int64(standByInterval/2) {
		e.standByAt = now
		e.standBy.Reset(standByInterval)
	}
}

// standByDeadline returns the read deadline a Wait waits on the socket
// under, setting it only when the one in force will not do: one no later
// than want, what the Wait asks for (standByInterval from now, or the
// context's deadline if that is sooner), and not sooner than half an
// interval from now (or exactly want). A deadline is so set about once
// every half interval rather than twice a round trip. The caller holds the
// receive token, which owns rxDeadline.
func (e *engine) standByDeadline(now time.Time, want time.Time) (time.Time, error) {
	cur := e.rxDeadline
	if !cur.IsZero() && !cur.After(want) && (cur.Equal(want) || cur.Sub(now) >= standByInterval/2) {
		return cur, nil
	}
	e.rxDeadline = time.Time{}
	if err := e.c.SetReadDeadline(want); err != nil {
		return time.Time{}, err
	}
	e.rxDeadline = want
	return want, nil
}

// clearDeadline removes the deadline a Wait left on the socket, before a
// read that must not time out (the receiver goroutine's). The caller holds
// the receive token.
func (e *engine) clearDeadline() {
	if !e.rxDeadline.IsZero() {
		e.rxDeadline = time.Time{}
		e.c.SetReadDeadline(time.Time{})
	}
}

// startAwait marks the receive token holder as waiting between FPDUs, so
// that poke may cut the wait short. It reports false, and marks nothing,
// when a completion was pushed since the last look at the CQ (the holder
// clears poked just before it looks): that completion is there to take,
// not to wait past. poked and awaiting are sequentially consistent
// atomics: either this sees the poke or the poke sees the mark.
func (e *engine) startAwait() bool {
	e.awaiting.Store(true)
	if e.poked.Load() {
		e.endAwait()
		return false
	}
	return true
}

// endAwait unmarks the wait, reporting whether a poke cut it short. A cut
// leaves a deadline in the past: it is forgotten (rxDeadline), so that the
// next wait sets its own. Holding pokeMu makes the unmark always follow a
// poke's deadline, never precede it: a poke never reaches a read in the
// middle of an FPDU.
func (e *engine) endAwait() (cut bool) {
	e.pokeMu.Lock()
	e.awaiting.Store(false)
	cut, e.cut = e.cut, false
	e.pokeMu.Unlock()
	if cut {
		e.rxDeadline = pastDeadline
	}
	return cut
}

// poke tells the receive token holder of a waiting CQ that a completion
// was pushed: it cuts short the holder's wait between FPDUs, if it is
// waiting, or the one it is about to start. The holder's own pushes come
// here too, and cost two atomics.
func (e *engine) poke() {
	e.poked.Store(true)
	if !e.awaiting.Load() {
		return
	}
	e.pokeMu.Lock()
	if e.awaiting.Load() && !e.cut {
		e.cut = true
		e.c.SetReadDeadline(pastDeadline)
	}
	e.pokeMu.Unlock()
}

var pastDeadline = time.Unix(1, 0)

// receiveFor runs the receive loop in a goroutine waiting on cq until cq
// holds a completion, ctx ends, or the connection fails. ok is false when
// the caller should wait the usual way: the receive token was taken (the
// receiver goroutine is reading, or another waiter is), the connection
// ended (its flushed completions come the usual way), or nothing arrived
// for standByInterval — a long wait is left to the receiver goroutine, so
// that a Wait that waits long costs one timer, not one per interval.
func (e *engine) receiveFor(ctx context.Context, cq *CQ, wcs []WorkCompletion) (n int, err error, ok bool) {
	now := nanotime()
	e.lastWait.Store(now) // the receiver stands by at its next pause
	if !e.rxMu.TryLock() {
		return 0, nil, false
	}
	e.pushStandBy(now)
	cq.waiting.Store(e)
	back := false
	defer func() {
		cq.waiting.Store(nil)
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
	deadline, hasDeadline := ctx.Deadline()
	for {
		e.poked.Store(false) // what a poke until now pushed, Poll finds
		if n := cq.Poll(wcs); n > 0 {
			e.lastWait.Store(nanotime())
			return n, true, false, nil
		}
		if e.dead.Load() {
			return 0, false, false, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, true, false, err
		}
		if !e.rx.r.Whole() {
			now := time.Now()
			if hasDeadline && !now.Before(deadline) {
				return 0, true, false, context.DeadlineExceeded
			}
			want := now.Add(standByInterval)
			if hasDeadline && deadline.Before(want) {
				want = deadline
			}
			dl, err := e.standByDeadline(now, want)
			if err != nil {
				// A connection without deadlines cannot be woken
				// from a wait: leave it to the receiver goroutine.
				return 0, false, true, nil
			}
			if !e.startAwait() {
				continue // a completion came: look again
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
			case !cut && (!hasDeadline || dl != deadline):
				// A whole interval of silence: this is a long wait.
				return 0, false, true, nil
			default:
				continue // poked, or ctx's deadline: look again
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

// waitRxMaxFPDU is the longest FPDU a waiter receives itself. Longer ones
// are left to the receiver goroutine, whose reads put payload straight
// into place rather than through the Reader's buffer, and from which a
// peer that stalls inside a long FPDU cannot keep a Wait past its context.
const waitRxMaxFPDU = 4096 + 64

// handBack returns the socket to the receiver goroutine at once; the
// caller has let go of the receive token.
func (e *engine) handBack() {
	e.lastWait.Store(0)
	select {
	case e.resume <- struct{}{}:
	default:
	}
}
