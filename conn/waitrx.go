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
// receiving, the receiver goroutine stands by, looking again every
// standByInterval; when no Wait has received for that long, or a Wait
// found the socket silent for that long, it takes the socket back. No
// goroutine spins: a waiter wakes at most once before it leaves the socket
// to the receiver goroutine, which then blocks in the read.

// standByInterval is how long the receiver goroutine leaves the socket to
// CQ.Wait after the last Wait that received, and how long a Wait waits on
// a silent socket before it hands the socket back.
const standByInterval = time.Millisecond

// waitersReceive reports whether a CQ.Wait received for the connection
// recently enough that the receiver goroutine should leave it the socket.
func (e *engine) waitersReceive() bool {
	last := e.lastWait.Load()
	return last != 0 && nanotime()-last < int64(standByInterval)
}

// standBy is the receiver goroutine's part while waiters receive: it lets
// go of the receive token and takes it back after a pause that ends after
// standByInterval or when a waiter hands the socket back. It never blocks
// on the token while a waiter holds it: a goroutine blocked in Lock would
// be woken by every waiter's Unlock only to find the next Wait's TryLock
// ahead of it (a wake-up per round trip, and after a millisecond the
// mutex's starvation mode hands the token to it and takes it from the
// waiters). If the token is taken when the pause ends, it pauses again;
// only once the connection has ended does it wait for the holder, which
// then lets go at once.
func (e *engine) standByFor() {
	e.rxUnlock()
	// Wake a waiter that looked while this goroutine still held the token.
	e.qp.scq.wake()
	e.qp.rcq.wake()
	for {
		if e.standByPause() {
			e.rxMu.Lock()
			return
		}
		if e.rxMu.TryLock() {
			return
		}
	}
}

// standByPause is one pause of standByFor; it reports whether the queue
// pair has left the connected states.
func (e *engine) standByPause() (over bool) {
	if e.standBy == nil {
		e.standBy = time.NewTimer(standByInterval)
	} else {
		e.standBy.Reset(standByInterval)
	}
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

// setAwaiting marks the receive token holder as waiting between FPDUs
// until dl (so that poke may cut the wait short), or unmarks it, clearing
// the deadline and reporting whether a poke cut the wait. Holding pokeMu
// makes the clear always follow a poke's deadline, never precede it: a
// deadline never reaches a read in the middle of an FPDU.
func (e *engine) setAwaiting(on bool, dl time.Time) (poked bool, err error) {
	e.pokeMu.Lock()
	e.awaiting = on
	if on {
		err = e.c.SetReadDeadline(dl)
		e.awaiting = err == nil
	} else {
		e.c.SetReadDeadline(time.Time{})
		poked = e.poked
		e.poked = false
	}
	e.pokeMu.Unlock()
	return poked, err
}

// poke cuts short the wait between FPDUs of the receive token holder, if
// it is waiting; otherwise it does nothing.
func (e *engine) poke() {
	e.pokeMu.Lock()
	if e.awaiting && !e.poked {
		e.poked = true
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
	e.lastWait.Store(nanotime()) // the receiver stands by at its next pause
	if !e.rxMu.TryLock() {
		return 0, nil, false
	}
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
			dl := now.Add(standByInterval)
			if hasDeadline && deadline.Before(dl) {
				dl = deadline
			}
			if _, err := e.setAwaiting(true, dl); err != nil {
				// A connection without deadlines cannot be woken
				// from a wait: leave it to the receiver goroutine.
				return 0, false, true, nil
			}
			whole, err := e.rx.r.AwaitFPDU(waitRxMaxFPDU)
			poked, _ := e.setAwaiting(false, time.Time{})
			switch {
			case err == nil && !whole:
				// A long FPDU: the receiver goroutine places its
				// payload straight from the socket.
				return 0, false, true, nil
			case err == nil:
			case !errors.Is(err, os.ErrDeadlineExceeded):
				e.receiveFailed(err)
				continue
			case !poked && (!hasDeadline || dl != deadline):
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
