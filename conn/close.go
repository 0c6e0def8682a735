package conn

import (
	"net"
	"time"
)

// DefaultCloseTimeout bounds how long Close waits for posted work to be
// sent before it closes the connection anyway.
const DefaultCloseTimeout = 10 * time.Second

// Close closes the queue pair gracefully: no more work may be posted, work
// already posted is sent (Reads wait for their responses), then the TCP
// connection is closed (FIN). Work that could not finish, and every posted
// receive, completes with WCWRFlushErr. Close returns when the queue pair
// is closed; for a CQ with a completion handler, the flushed completions
// have been handed to it, unless a handler of this queue pair was running
// meanwhile (for instance the one that called Close), in which case that
// handler's goroutine hands them over once it returns. Close waits at most
// DefaultCloseTimeout for the peer, and returns at once during connection
// setup that still waits for the peer. It is safe to call more than once,
// and from a completion handler.
func (qp *QP) Close() error {
	return qp.shutdown(false)
}

// Abort closes the queue pair at once: the TCP connection is reset and all
// outstanding work is flushed. It cuts short a graceful Close in progress
// and a Terminate still being sent.
func (qp *QP) Abort() error {
	return qp.shutdown(true)
}

func (qp *QP) shutdown(abort bool) error {
	qp.mu.Lock()
	switch qp.state {
	case stateIdle:
		qp.flushInErrorLocked(ErrQPClosed)
		qp.setState(stateClosed, ErrQPClosed)
		qp.mu.Unlock()
	case stateConnecting:
		qp.closeReq = true
		c, cancel := qp.setupConn, qp.setupCancel
		// A peer-to-peer RTR that is going out must finish (closing a
		// connection before its RTR crashes some peers, Linux siw); while
		// setup still waits for the peer, cutting it is the point.
		cut := abort || qp.setupPhase == setupWaiting
		qp.mu.Unlock()
		if cut {
			if cancel != nil {
				cancel()
			}
			if c != nil {
				c.Close()
			}
		}
		<-qp.finished
	case stateRTS, stateClosing:
		e := qp.eng
		if abort {
			qp.mu.Unlock()
			e.abort()
			break
		}
		if qp.state == stateClosing {
			qp.mu.Unlock() // another Close drains; wait for it
			break
		}
		qp.setState(stateClosing, nil)
		qp.checkDrainedLocked()
		qp.mu.Unlock()
		qp.kick()
		e.drain(DefaultCloseTimeout)
		e.fail(ErrQPClosed, nil)
	default:
		e := qp.eng
		qp.mu.Unlock()
		if abort && e != nil {
			e.abort()
		}
	}
	<-qp.finished
	qp.deliverAll()
	return nil
}

// abort resets the connection: no Terminate, no waiting for anything.
func (e *engine) abort() {
	if tc, ok := rawConn(e.c).(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	e.failWithin(ErrQPClosed, nil, 0)
	e.c.Close() // also when the connection had failed already and a Terminate is pending
}

// drain waits until everything posted has completed and every Read Request
// of the peer is answered, the connection ends, or timeout passes. It
// drives the connection itself whenever its tokens are free: the
// goroutines that usually hold them may be running a completion handler,
// which may be the one that called Close.
func (e *engine) drain(timeout time.Duration) {
	qp := e.qp
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-e.drained:
			return
		case <-qp.done:
			return
		default:
		}
		if e.txMu.TryLock() {
			// Past the deadline the timer ends the connection; the slack
			// lets it do so before a write under way fails on its own.
			e.c.SetWriteDeadline(deadline.Add(time.Second))
			e.transmit()
			e.txUnlock()
			qp.deliver()
		}
		qp.mu.Lock()
		reading := e.orq.outstanding() > 0
		qp.mu.Unlock()
		if reading && e.rxMu.TryLock() {
			e.receiveUntil(deadline, func() bool {
				qp.mu.Lock()
				defer qp.mu.Unlock()
				return e.orq.outstanding() == 0
			})
			e.rxUnlock()
			qp.deliver()
		}
		select {
		case <-e.drained:
			return
		case <-qp.done:
			return
		case <-timer.C:
			return
		case <-qp.wake:
			qp.kick() // the transmitter goroutine may be waiting for it too
		}
	}
}

// receiveUntil receives FPDUs until done reports true, the connection
// fails, or deadline passes. Called with rxMu held.
func (e *engine) receiveUntil(deadline time.Time, done func() bool) {
	e.rxDeadline = deadline
	e.c.SetReadDeadline(deadline)
	for !e.dead.Load() && !done() {
		if err := e.receiveOne(); err != nil {
			e.receiveFailed(err)
			return
		}
	}
}
