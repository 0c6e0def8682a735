package conn

import (
	"sync"
	"sync/atomic"
	"time"
)

// Receivers standing by. While CQ.Wait receives for a connection, its
// receiver goroutine has nothing to do but take the socket back once the
// program stops calling Wait. One timer for the whole process finds out
// for every standing-by receiver at once: each tick, a connection on which
// no Wait began since the last tick and no Wait holds the socket has its
// receiver woken to take it. A receiver whose waiter keeps receiving, or
// holds the socket through a long wait, is never woken. With a timer per
// receiver, idle queue pairs each with a goroutine in Wait cost 250 µs of
// CPU each per second (BenchmarkIdleWaitingQPs; 10,000 would cost cores).
//
// While every standing-by connection has a Wait holding its socket and
// none began anew, nothing can change until one of those Waits returns:
// the ticks then stop, and the first Wait to return (or receiver to stand
// by) starts them again, so the take-back bound holds from that moment on.
// A process whose waiters all sit in long Waits has no timer running.

// standByTick is how often the stand-by set is looked at. After the last
// Wait, the receiver takes the socket back within two ticks: the first
// finds the last Wait's mark and clears it, the second finds none. A peer's
// Read Requests wait that long at most for a program that stopped waiting.
// While Waits keep returning (a ping-pong) the ticks cannot stop, and a
// round trip that meets one is slowed past twice its median: at 8 ms the
// ticks made about 80 of the 500 round trips in 45,000 that took over
// 30 µs (with ticks a second apart, 430), which is the 99th percentile's
// territory; 16 ms halves their share.
const standByTick = 16 * time.Millisecond

// standBys is the process's set of receivers standing by.
var standBys standBySet

type standBySet struct {
	mu      sync.Mutex
	list    []*engine // engine.standByAt is its index here
	timer   *time.Timer
	armed   bool      // the timer is set, or a tick is running
	ticking bool      // a tick is looking at batch
	batch   []*engine // the tick's copy of list
	// parked: the ticks stopped because every socket is held; a Wait
	// that returns looks at it (one atomic load) and restarts them.
	parked atomic.Bool
}

// add puts e's receiver in the set, starting the ticks if they are not
// running (its waiter may be a short one).
func (s *standBySet) add(e *engine) {
	s.mu.Lock()
	e.standByAt = len(s.list)
	s.list = append(s.list, e)
	s.startLocked()
	s.mu.Unlock()
}

// startLocked sets the next tick unless one is set or running.
func (s *standBySet) startLocked() {
	s.parked.Store(false)
	if s.armed {
		return
	}
	s.armed = true
	if s.timer == nil {
		s.timer = time.AfterFunc(standByTick, s.tick)
	} else {
		s.timer.Reset(standByTick)
	}
}

// restart starts parked ticks again: a Wait that held a socket returned.
func (s *standBySet) restart() {
	s.mu.Lock()
	s.startLocked()
	s.mu.Unlock()
}

// remove takes e's receiver out of the set; the ticks stop with the last,
// so an idle process has no timer and no goroutine for it.
func (s *standBySet) remove(e *engine) {
	s.mu.Lock()
	i, last := e.standByAt, len(s.list)-1
	s.list[i] = s.list[last]
	s.list[i].standByAt = i
	s.list[last] = nil
	s.list = s.list[:last]
	e.standByAt = -1
	if last == 0 && s.armed && !s.ticking && s.timer.Stop() {
		s.armed = false
		s.parked.Store(false)
	}
	s.mu.Unlock()
}

// tick looks at every receiver standing by, outside the lock (adds and
// removes go on meanwhile; a receiver woken after its removal finds a
// stale resume, which costs it one TryLock). Ticks never overlap: the
// next is set once this one is done.
func (s *standBySet) tick() {
	s.mu.Lock()
	if s.ticking {
		s.mu.Unlock()
		return
	}
	s.ticking = true
	s.batch = append(s.batch[:0], s.list...)
	s.mu.Unlock()
	held := s.look()
	if held {
		// Park, then look again: a Wait that returns stores that it no
		// longer holds before it loads parked, so either it sees parked
		// and restarts the ticks, or this second look sees it gone.
		s.parked.Store(true)
		held = s.stillHeld()
	}
	clear(s.batch)
	s.mu.Lock()
	s.ticking = false
	switch {
	case len(s.list) == 0:
		s.armed = false
	case held && s.parked.Load():
		s.armed = false
	default:
		s.parked.Store(false)
		s.timer.Reset(standByTick)
	}
	s.mu.Unlock()
}

// look is a tick's look at the batch; it reports whether every socket is
// held by one long Wait.
func (s *standBySet) look() (held bool) {
	held = true
	for _, e := range s.batch {
		held = e.lookAtStandBy() && held
	}
	return held
}

// stillHeld reports whether every socket of the batch is still held, and
// no Wait began on any.
func (s *standBySet) stillHeld() bool {
	for _, e := range s.batch {
		if e.waitBegan.Load() || !e.waitHeld() {
			return false
		}
	}
	return true
}

// lookAtStandBy is a tick's look at e: Waits still beginning, or one
// holding the socket, leave the receiver standing by; otherwise it is
// woken to take the socket back. It reports whether one Wait has held the
// socket since the last look, which nothing but that Wait's return can
// change.
func (e *engine) lookAtStandBy() (held bool) {
	if e.waitersReceive() {
		return false
	}
	if e.waitHeld() {
		return true
	}
	e.wakeReceiver()
	return false
}

// waitHeld reports whether a CQ.Wait holds e's socket.
func (e *engine) waitHeld() bool {
	return e.qp.rcq.waiting.Load() == e || e.qp.scq.waiting.Load() == e
}

// wakeReceiver tells a standing-by receiver to try for the receive token.
func (e *engine) wakeReceiver() {
	select {
	case e.resume <- struct{}{}:
	default:
	}
}
