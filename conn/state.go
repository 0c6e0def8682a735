package conn

import "fmt"

type qpState uint8

const (
	stateIdle       qpState = iota // created, not connected
	stateConnecting                // connection setup under way
	stateRTS                       // connected: ready to send
	stateClosing                   // graceful close draining the send queue
	stateError                     // left RTS for good (error or close): the engine is stopping
	stateClosed                    // the engine stopped and all work is flushed
)

func (s qpState) String() string {
	return [...]string{"idle", "connecting", "rts", "closing", "error", "closed"}[s]
}

// setState is the only place that changes the queue pair's state, and the
// only place that closes done (when the queue pair leaves the connected
// states for good) and finished (when it is closed). cause becomes Err the
// first time the queue pair leaves them; later causes do not replace it.
// Called with QP.mu held.
func (qp *QP) setState(to qpState, cause error) {
	from := qp.state
	if !legalTransition(from, to) {
		panic(fmt.Sprintf("iwarp: internal error: queue pair state %s → %s", from, to))
	}
	qp.state = to
	if to >= stateError {
		if qp.err == nil {
			qp.err = cause
		}
		if from < stateError {
			close(qp.done)
		}
	}
	if to == stateClosed {
		if qp.srq != nil {
			qp.srq.unbind() // its receive is flushed: the SRQ may be closed
		}
		close(qp.finished)
	}
}

// legalTransition lists the state machine's edges.
func legalTransition(from, to qpState) bool {
	switch from {
	case stateIdle:
		return to == stateConnecting || to == stateClosed
	case stateConnecting:
		return to == stateRTS || to == stateError || to == stateClosed
	case stateRTS:
		return to == stateClosing || to == stateError
	case stateClosing:
		return to == stateError
	case stateError:
		return to == stateClosed
	}
	return false
}
