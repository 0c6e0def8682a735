package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// Errors of posting and of queue-pair state.
var (
	ErrSQFull    = errors.New("iwarp: send queue full")
	ErrRQFull    = errors.New("iwarp: receive queue full")
	ErrQPClosed  = errors.New("iwarp: queue pair closed")
	ErrQPState   = errors.New("iwarp: queue pair is not in a state that allows this")
	ErrInvalidWR = errors.New("iwarp: invalid work request")
)

// Queue-pair limits.
const (
	DefaultQueueDepth = 64
	DefaultMaxSGE     = 4
	MaxQueueDepth     = 1 << 16
	MaxSGE            = 32
	// MaxMessage is the longest message (Send, Write, Read) one work request
	// may move: RDMAP Read sizes and DDP message offsets are 32 bits.
	MaxMessage = 1<<32 - 1
)

// QPCaps sizes a queue pair's queues. Zero fields take the defaults.
type QPCaps struct {
	SendDepth  int // send work requests outstanding (default 64)
	RecvDepth  int // receive work requests posted (default 64)
	MaxSendSGE int // SGEs per send work request (default 4)
	MaxRecvSGE int // SGEs per receive work request (default 4)
	// RecvCQ receives the completions of receive work requests; nil means
	// the CQ given to NewQP, which otherwise takes send completions.
	RecvCQ *CQ
	// SRQ, if set, is the shared receive queue (of the same PD) the queue
	// pair takes its receives from instead of a receive queue of its own:
	// RecvDepth and MaxRecvSGE are then ignored and QP.PostRecv fails with
	// ErrQPUsesSRQ.
	SRQ *SRQ
}

func (c *QPCaps) setDefaults() error {
	for _, f := range []struct {
		v        *int
		def, max int
		name     string
	}{
		{&c.SendDepth, DefaultQueueDepth, MaxQueueDepth, "send depth"},
		{&c.RecvDepth, DefaultQueueDepth, MaxQueueDepth, "receive depth"},
		{&c.MaxSendSGE, DefaultMaxSGE, MaxSGE, "send SGEs"},
		{&c.MaxRecvSGE, DefaultMaxSGE, MaxSGE, "receive SGEs"},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 1 || *f.v > f.max {
			return badOption("%s %d: must be from 1 to %d", f.name, *f.v, f.max)
		}
	}
	return nil
}

var qpNumbers atomic.Uint32

// setupPhase is where connection setup stands, for Close.
type setupPhase uint8

const (
	setupWaiting setupPhase = iota // waiting for the peer (TCP connect, MPA frames)
	setupRTR                       // sending the peer-to-peer RTR: must not be cut short
)

// QP is a queue pair: a send queue and a receive queue bound to one iWARP
// connection (one RDMAP stream over one TCP connection). Create it with
// PD.NewQP, post receives, then connect it with Connect, Client or a
// Listener's ConnRequest.Accept. All methods are safe for concurrent use,
// including from completion handlers.
type QP struct {
	pd   *PD
	scq  *CQ
	rcq  *CQ
	qpn  uint32
	caps QPCaps

	// mu guards everything below; see "Locks and ownership" in doc.go.
	mu    sync.Mutex
	state qpState
	err   error // why the QP left RTS

	sq   sendQueue
	rq   recvQueue  // unused (no ring) when bound to an SRQ
	recv recvSource // where Sends are placed: &rq or the SRQ binding
	srq  *SRQ       // caps.SRQ

	done     chan struct{} // closed when the QP leaves RTS for good
	finished chan struct{} // closed when the engine stopped and all work flushed
	wake     chan struct{} // capacity 1: there is transmit work
	// tx is the connection kick starts a transmitter goroutine for; nil
	// until established. An atomic, not eng: kick runs under no lock.
	tx atomic.Pointer[engine]

	// Completions for CQs with a handler wait here until the goroutine
	// that made them holds no lock of the library (deliver).
	pend, spare []pendingWC
	delivering  bool
	deliverIdle *sync.Cond // on mu: delivering went false
	handlers    bool       // scq or rcq has a handler

	eng         *engine            // nil until the connection is established
	setupConn   net.Conn           // the connection while setup runs
	setupCancel context.CancelFunc // cuts setup short
	setupPhase  setupPhase
	closeReq    bool      // Close was called during setup
	setupStart  time.Time // when setup began, for Stats

	stats counters
}

// NewQP creates a queue pair in pd whose completions go to cq (and to
// caps.RecvCQ for receives, if set). Receives may be posted at once; sends
// posted before the connection is established are held until it is.
func (pd *PD) NewQP(cq *CQ, caps QPCaps) (*QP, error) {
	if cq == nil {
		return nil, badOption("nil completion queue")
	}
	if err := caps.setDefaults(); err != nil {
		return nil, err
	}
	rcq := caps.RecvCQ
	if rcq == nil {
		rcq = cq
	}
	qp := &QP{
		pd:       pd,
		scq:      cq,
		rcq:      rcq,
		qpn:      qpNumbers.Add(1),
		caps:     caps,
		sq:       newSendQueue(caps.SendDepth, caps.MaxSendSGE),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	recvs := caps.RecvDepth // receives that may complete at once
	if caps.SRQ != nil {
		b, err := caps.SRQ.bind(qp)
		if err != nil {
			return nil, err
		}
		// Receives taken from the SRQ complete at most as many at once as
		// the receive CQ holds: the completions waiting for a handler
		// never outgrow that, so completing does not allocate.
		qp.srq, qp.recv, recvs = caps.SRQ, b, rcq.Cap()
	} else {
		qp.rq = newRecvQueue(caps.RecvDepth, caps.MaxRecvSGE)
		qp.recv = &qp.rq
	}
	qp.deliverIdle = sync.NewCond(&qp.mu)
	if cq.handler != nil || rcq.handler != nil {
		qp.handlers = true
		n := caps.SendDepth + recvs
		qp.pend = make([]pendingWC, 0, n)
		qp.spare = make([]pendingWC, 0, n)
	}
	return qp, nil
}

// QPN returns the queue pair's number, which its completions carry.
func (qp *QP) QPN() uint32 { return qp.qpn }

// PD returns the queue pair's protection domain.
func (qp *QP) PD() *PD { return qp.pd }

// Done returns a channel that is closed when the queue pair leaves the
// connected state for good: the peer disconnected, an error ended the
// connection, or Close was called. Err then says why. It reports these
// events even when no work is posted.
func (qp *QP) Done() <-chan struct{} { return qp.done }

// Err returns why the queue pair left the connected state: nil while it is
// connected (or not yet connected), ErrQPClosed after a local Close,
// ErrPeerClosed after the peer disconnected, or the error that ended it (a
// *rdmap.TerminateError for a Terminate sent or received; for one this
// side sent, its Delivery says whether it reached the socket, final once
// the queue pair is closed: after Close or Abort returned).
func (qp *QP) Err() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.err
}

// kick wakes the transmitter goroutine, starting one if none runs.
func (qp *QP) kick() {
	select {
	case qp.wake <- struct{}{}:
	default:
	}
	if e := qp.tx.Load(); e != nil && !e.txRunning.Load() && e.txRunning.CompareAndSwap(false, true) {
		e.txStarts.Add(1)
		go runTransmitter(e)
	}
}

// runTransmitter is engine.transmitter, reached through a variable: the
// send-operation table's start functions lead to kick, and kick to the
// transmitter, which reads that table — an initialization cycle if named.
var runTransmitter func(*engine)

func init() { runTransmitter = (*engine).transmitter }

// LocalAddr returns the local network address, if connected.
func (qp *QP) LocalAddr() net.Addr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil {
		return nil
	}
	return qp.eng.c.LocalAddr()
}

// RemoteAddr returns the peer's network address, if connected.
func (qp *QP) RemoteAddr() net.Addr {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil {
		return nil
	}
	return qp.eng.c.RemoteAddr()
}

// Negotiated is what MPA connection setup settled: CRC, markers per
// direction, IRD, ORD, peer-to-peer mode and the RTR type.
type Negotiated = mpa.Result

// Negotiated returns what MPA connection setup settled, or nil before the
// connection is established.
func (qp *QP) Negotiated() *Negotiated {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil || qp.eng.res == nil {
		return nil
	}
	r := *qp.eng.res
	return &r
}

// ReadLimits returns the RDMA Read depths in use once connected: ird, the
// peer's Read Requests this side answers at once (the IRD it advertised),
// and ord, its own Read Requests it keeps outstanding (the peer's IRD, or
// the WithPeerIRD assumption where setup exchanged none). Both are 0
// before the connection is established.
func (qp *QP) ReadLimits() (ird, ord int) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil {
		return 0, 0
	}
	return qp.eng.irq.limit, qp.eng.orq.limit
}

// PeerIsIwarpGo reports whether the connected peer is an iwarp-go
// endpoint (recognised in the MPA private data); false before connecting.
func (qp *QP) PeerIsIwarpGo() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.eng != nil && qp.eng.peerIsGo
}

// PeerFlushes reports whether the connected peer answers OpFlush (both
// sides declared the Flush extension); false before connecting.
func (qp *QP) PeerFlushes() bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.eng != nil && qp.eng.ext&rdmap.ExtFlush != 0
}

func (qp *QP) postableLocked() error {
	switch qp.state {
	case stateIdle, stateConnecting, stateRTS:
		return nil
	case stateClosing:
		return ErrQPClosed
	}
	if qp.err != nil && !errors.Is(qp.err, ErrQPClosed) {
		return fmt.Errorf("%w: %w", ErrQPClosed, qp.err)
	}
	return ErrQPClosed
}
