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
// receive, completes with WCWRFlushErr. Close returns when the queue pair's
// goroutines have ended. It is safe to call more than once.
func (qp *QP) Close() error {
	return qp.shutdown(false)
}

// Abort closes the queue pair at once: the TCP connection is reset and all
// outstanding work is flushed.
func (qp *QP) Abort() error {
	return qp.shutdown(true)
}

func (qp *QP) shutdown(abort bool) error {
	qp.mu.Lock()
	switch qp.state {
	case stateIdle:
		qp.state = stateClosed
		qp.err = ErrQPClosed
		close(qp.done)
		qp.flushLocked(ErrQPClosed)
		qp.mu.Unlock()
		qp.deliver()
		close(qp.finished)
		return nil
	case stateConnecting:
		// Setup finishes first (a peer-to-peer RTR must go out); if it is
		// still waiting for the peer, closing the socket ends it.
		qp.closeReq = true
		if c := qp.setupConn; c != nil && abort {
			c.Close()
		}
		qp.mu.Unlock()
		<-qp.finished
		return nil
	case stateRTS:
		e := qp.eng
		if abort {
			qp.mu.Unlock()
			if tc, ok := rawConn(e.c).(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			e.fail(ErrQPClosed, nil)
			<-qp.finished
			return nil
		}
		qp.state = stateClosing
		qp.checkDrainedLocked()
		qp.mu.Unlock()
		qp.kick()
		select {
		case <-e.drained:
		case <-qp.done:
		case <-time.After(DefaultCloseTimeout):
		}
		e.fail(ErrQPClosed, nil)
		<-qp.finished
		return nil
	}
	qp.mu.Unlock()
	<-qp.finished
	return nil
}

// signalDrained tells a graceful Close that the send side is idle.
func (e *engine) signalDrained() {
	if !e.drainSignaled {
		e.drainSignaled = true
		close(e.drained)
	}
}
