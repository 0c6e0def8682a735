package conn

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/stag"
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

type qpState uint8

const (
	stateIdle       qpState = iota // created, not connected
	stateConnecting                // connection setup under way
	stateRTS                       // connected: ready to send
	stateClosing                   // graceful close draining the send queue
	stateError                     // fatal error: work is being flushed
	stateClosed                    // closed, all work flushed
)

func (s qpState) String() string {
	return [...]string{"idle", "connecting", "rts", "closing", "error", "closed"}[s]
}

var qpNumbers atomic.Uint32

// sgeRef is an SGE resolved at post time: the bytes it names and the region
// whose reference the work request holds until it completes.
type sgeRef struct {
	region *stag.Region
	off    uint64 // offset of buf in the region
	buf    []byte
}

type sendWQE struct {
	id      uint64
	op      Op
	flags   SendFlags
	nsge    int
	length  int
	remote  RemoteAddr
	invSTag stag.STag
	done    bool
	status  WCStatus
	err     error
}

type recvWQE struct {
	id     uint64
	nsge   int
	length int
}

// QP is a queue pair: a send queue and a receive queue bound to one iWARP
// connection (one RDMAP stream over one TCP connection). Create it with
// PD.NewQP, post receives, then connect it with Connect, Client or a
// Listener's ConnRequest.Accept. All methods are safe for concurrent use.
type QP struct {
	pd   *PD
	scq  *CQ
	rcq  *CQ
	qpn  uint32
	caps QPCaps

	mu    sync.Mutex
	state qpState
	err   error // why the QP left RTS

	sq                     []sendWQE
	sqSGE                  []sgeRef
	sqHead, sqNext, sqTail uint32 // oldest incomplete, next to transmit, next free

	rq             []recvWQE
	rqSGE          []sgeRef
	rqHead, rqTail uint32 // oldest posted (being filled), next free

	done     chan struct{} // closed when the QP leaves RTS for good
	finished chan struct{} // closed when the engine stopped and all work flushed
	wake     chan struct{} // capacity 1: the transmitter has work

	// Completions for CQs with a handler wait here, under mu, until the
	// goroutine that made them has released mu (deliver).
	pend, spare []pendingWC
	delivering  bool
	handlers    bool // scq or rcq has a handler

	eng       *engine  // nil until the connection is established
	setupConn net.Conn // the connection while setup runs
	closeReq  bool     // Close was called during setup
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
		sq:       make([]sendWQE, caps.SendDepth),
		sqSGE:    make([]sgeRef, caps.SendDepth*caps.MaxSendSGE),
		rq:       make([]recvWQE, caps.RecvDepth),
		rqSGE:    make([]sgeRef, caps.RecvDepth*caps.MaxRecvSGE),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	if cq.handler != nil || rcq.handler != nil {
		qp.handlers = true
		n := caps.SendDepth + caps.RecvDepth
		qp.pend = make([]pendingWC, 0, n)
		qp.spare = make([]pendingWC, 0, n)
	}
	return qp, nil
}

type pendingWC struct {
	cq *CQ
	wc WorkCompletion
}

// completeLocked delivers a completion to cq: into its ring, or, for a CQ
// with a handler, into the queue pair's pending list, which deliver hands
// to the handler once mu is released.
func (qp *QP) completeLocked(cq *CQ, wc *WorkCompletion) {
	if cq.handler == nil {
		cq.push(wc)
		return
	}
	qp.pend = append(qp.pend, pendingWC{cq: cq, wc: *wc})
}

// deliver calls the handlers for pending completions, without holding mu,
// one goroutine at a time per queue pair (so in order). Every path that may
// complete work calls it after unlocking mu.
func (qp *QP) deliver() {
	if !qp.handlers {
		return
	}
	qp.mu.Lock()
	if qp.delivering {
		qp.mu.Unlock()
		return // the goroutine delivering now picks these up too
	}
	qp.delivering = true
	for len(qp.pend) > 0 {
		batch := qp.pend
		qp.pend = qp.spare[:0]
		qp.mu.Unlock()
		for i := range batch {
			p := &batch[i]
			p.cq.unreserve(1)
			p.cq.handler(&p.wc)
			*p = pendingWC{}
		}
		qp.mu.Lock()
		qp.spare = batch[:0]
	}
	qp.delivering = false
	qp.mu.Unlock()
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
// *rdmap.TerminateError for a Terminate sent or received).
func (qp *QP) Err() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return qp.err
}

// slot returns the ring position of counter n in a ring of size len.
func slot(n uint32, size int) int { return int(n % uint32(size)) }

func (qp *QP) sqLen() int { return int(qp.sqTail - qp.sqHead) }
func (qp *QP) rqLen() int { return int(qp.rqTail - qp.rqHead) }

func (qp *QP) postableLocked() error {
	switch qp.state {
	case stateIdle, stateConnecting, stateRTS:
		return nil
	case stateClosing:
		return ErrQPClosed
	}
	if qp.err != nil {
		return fmt.Errorf("%w: %w", ErrQPClosed, qp.err)
	}
	return ErrQPClosed
}

// resolve checks sgl against the queue pair's PD and the rights need, and
// takes a reference on each region. On failure no reference is kept.
func (qp *QP) resolve(dst []sgeRef, sgl []SGE, need Access) (int, error) {
	total := 0
	for i, s := range sgl {
		if s.MR == nil {
			releaseRefs(dst[:i])
			return 0, fmt.Errorf("%w: SGE %d has no memory region", ErrInvalidWR, i)
		}
		if s.Offset < 0 || s.Length < 0 {
			releaseRefs(dst[:i])
			return 0, fmt.Errorf("%w: SGE %d has a negative offset or length", ErrInvalidWR, i)
		}
		b, f := qp.pd.pd.CheckLocal(s.MR.r, uint64(s.Offset), uint64(s.Length), need)
		if f != stag.OK {
			releaseRefs(dst[:i])
			return 0, fmt.Errorf("%w: SGE %d (%s, offset %d, length %d): %v", ErrInvalidWR, i, s.MR.r, s.Offset, s.Length, f)
		}
		if err := s.MR.r.Acquire(); err != nil {
			releaseRefs(dst[:i])
			return 0, fmt.Errorf("%w: SGE %d: %v", ErrInvalidWR, i, err)
		}
		dst[i] = sgeRef{region: s.MR.r, off: uint64(s.Offset), buf: b}
		total += s.Length
		if total > MaxMessage {
			releaseRefs(dst[:i+1])
			return 0, fmt.Errorf("%w: message longer than %d bytes", ErrInvalidWR, MaxMessage)
		}
	}
	return total, nil
}

func releaseRefs(refs []sgeRef) {
	for i := range refs {
		if refs[i].region != nil {
			refs[i].region.Release()
		}
		refs[i] = sgeRef{}
	}
}

// PostRecv posts a receive buffer for one incoming Send. Receives may be
// posted before the queue pair is connected.
func (qp *QP) PostRecv(wr RecvWR) error {
	qp.mu.Lock()
	err := qp.postRecvLocked(&wr)
	qp.mu.Unlock()
	return err
}

// PostRecvBatch posts several receives and returns how many were posted.
func (qp *QP) PostRecvBatch(wrs []RecvWR) (int, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	for i := range wrs {
		if err := qp.postRecvLocked(&wrs[i]); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

func (qp *QP) postRecvLocked(wr *RecvWR) error {
	if err := qp.postableLocked(); err != nil {
		return err
	}
	if len(wr.SGL) > qp.caps.MaxRecvSGE {
		return fmt.Errorf("%w: %d SGEs, the queue pair takes %d", ErrInvalidWR, len(wr.SGL), qp.caps.MaxRecvSGE)
	}
	if qp.rqLen() == len(qp.rq) {
		return ErrRQFull
	}
	i := slot(qp.rqTail, len(qp.rq))
	refs := qp.rqSGE[i*qp.caps.MaxRecvSGE : (i+1)*qp.caps.MaxRecvSGE]
	n, err := qp.resolve(refs, wr.SGL, LocalWrite)
	if err != nil {
		return err
	}
	if err := qp.rcq.reserve(1); err != nil {
		releaseRefs(refs[:len(wr.SGL)])
		return err
	}
	qp.rq[i] = recvWQE{id: wr.ID, nsge: len(wr.SGL), length: n}
	qp.rqTail++
	return nil
}

// PostSend posts one send-queue work request. It never blocks on the network.
func (qp *QP) PostSend(wr SendWR) error {
	qp.mu.Lock()
	idle := qp.sqNext == qp.sqTail
	err := qp.postSendLocked(&wr)
	e := qp.eng
	qp.mu.Unlock()
	if err == nil {
		qp.send(e, idle)
	}
	return err
}

// PostSendBatch posts several work requests at once (one wake-up of the
// transmitter) and returns how many were posted.
func (qp *QP) PostSendBatch(wrs []SendWR) (int, error) {
	qp.mu.Lock()
	idle := qp.sqNext == qp.sqTail
	var err error
	n := 0
	for n < len(wrs) {
		if err = qp.postSendLocked(&wrs[n]); err != nil {
			break
		}
		n++
	}
	e := qp.eng
	qp.mu.Unlock()
	if n > 0 {
		qp.send(e, idle)
	}
	return n, err
}

// send gets newly posted work going. When the send queue was idle and the
// transmitter is not busy, the posting goroutine frames the work and writes
// what the socket takes without waiting (no goroutine hand-off, which is
// most of a small message's latency); anything left, and every other case,
// goes to the transmitter goroutine.
//
// Posts that follow each other closely (a stream) go to the transmitter
// instead, which writes them with one writev: the first post after a
// pause is sent at once, the rest are batched.
func (qp *QP) send(e *engine, idle bool) {
	if idle && e != nil {
		now := nanotime()
		if now-e.lastInline.Load() > inlineGap && e.txMu.TryLock() {
			e.lastInline.Store(now)
			e.transmitNow()
			e.txMu.Unlock()
			return
		}
	}
	qp.kick()
}

// inlineGap is how long after an inline send the next post is batched
// instead (nanoseconds): longer than back-to-back posts of a stream,
// shorter than a round trip.
const inlineGap = 8000

var clockBase = time.Now()

// nanotime is a monotonic clock reading in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockBase)) }

func (qp *QP) postSendLocked(wr *SendWR) error {
	if err := qp.postableLocked(); err != nil {
		return err
	}
	op := wr.Op
	if wr.Flags&Solicited != 0 {
		switch op {
		case OpSend:
			op = OpSendSE
		case OpSendInv:
			op = OpSendSEInv
		case OpSendSE, OpSendSEInv:
		default:
			return fmt.Errorf("%w: Solicited flag on %v", ErrInvalidWR, op)
		}
	}
	var need Access
	switch op {
	case OpSend, OpSendInv, OpSendSE, OpSendSEInv, OpWrite:
		need = stag.LocalRead
	case OpRead:
		need = LocalWrite
	case OpLocalInv:
		if len(wr.SGL) != 0 {
			return fmt.Errorf("%w: local invalidate takes no SGL", ErrInvalidWR)
		}
	default:
		return fmt.Errorf("%w: unknown operation %v", ErrInvalidWR, wr.Op)
	}
	if len(wr.SGL) > qp.caps.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs, the queue pair takes %d", ErrInvalidWR, len(wr.SGL), qp.caps.MaxSendSGE)
	}
	if qp.sqLen() == len(qp.sq) {
		return ErrSQFull
	}
	i := slot(qp.sqTail, len(qp.sq))
	refs := qp.sqSGE[i*qp.caps.MaxSendSGE : (i+1)*qp.caps.MaxSendSGE]
	n, err := qp.resolve(refs, wr.SGL, need)
	if err != nil {
		return err
	}
	if err := qp.scq.reserve(1); err != nil {
		releaseRefs(refs[:len(wr.SGL)])
		return err
	}
	qp.sq[i] = sendWQE{
		id:      wr.ID,
		op:      op,
		flags:   wr.Flags,
		nsge:    len(wr.SGL),
		length:  n,
		remote:  wr.Remote,
		invSTag: wr.InvSTag,
	}
	qp.sqTail++
	return nil
}

// kick wakes the transmitter.
func (qp *QP) kick() {
	select {
	case qp.wake <- struct{}{}:
	default:
	}
}

// completeSQLocked pushes the completions of finished send work requests,
// in posting order, and releases their memory references.
func (qp *QP) completeSQLocked() {
	for qp.sqHead != qp.sqNext {
		i := slot(qp.sqHead, len(qp.sq))
		w := &qp.sq[i]
		if !w.done {
			return
		}
		qp.finishSendLocked(i, w)
		qp.sqHead++
	}
	qp.checkDrainedLocked()
}

// checkDrainedLocked tells a graceful Close that everything posted has
// completed and every Read Request of the peer has been answered. It is
// called wherever either makes progress.
func (qp *QP) checkDrainedLocked() {
	if e := qp.eng; e != nil && qp.state == stateClosing && qp.sqHead == qp.sqTail && e.irqHead == e.irqTail {
		e.signalDrained()
	}
}

func (qp *QP) finishSendLocked(i int, w *sendWQE) {
	releaseRefs(qp.sqSGE[i*qp.caps.MaxSendSGE : i*qp.caps.MaxSendSGE+w.nsge])
	if w.status == WCSuccess && w.flags&Signaled == 0 {
		qp.scq.unreserve(1)
	} else {
		wc := WorkCompletion{
			ID:     w.id,
			QPN:    qp.qpn,
			Status: w.status,
			Op:     w.op.wcOpcode(),
			err:    w.err,
		}
		if w.status == WCSuccess {
			wc.ByteLen = uint32(w.length)
		}
		qp.completeLocked(qp.scq, &wc)
	}
	*w = sendWQE{}
}

// flushLocked completes every outstanding work request with WCWRFlushErr
// (or the status already recorded for it) once the engine has stopped.
func (qp *QP) flushLocked(cause error) {
	for qp.sqHead != qp.sqTail {
		i := slot(qp.sqHead, len(qp.sq))
		w := &qp.sq[i]
		if !w.done {
			w.status = WCWRFlushErr
			w.err = cause
		}
		qp.finishSendLocked(i, w)
		qp.sqHead++
	}
	qp.sqNext = qp.sqTail
	for qp.rqHead != qp.rqTail {
		i := slot(qp.rqHead, len(qp.rq))
		w := &qp.rq[i]
		releaseRefs(qp.rqSGE[i*qp.caps.MaxRecvSGE : i*qp.caps.MaxRecvSGE+w.nsge])
		qp.completeLocked(qp.rcq, &WorkCompletion{ID: w.id, QPN: qp.qpn, Status: WCWRFlushErr, Op: WCRecv, err: cause})
		*w = recvWQE{}
		qp.rqHead++
	}
}

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

// Negotiated returns what MPA connection setup settled (CRC, markers, IRD,
// ORD, peer-to-peer mode), or nil before the connection is established.
func (qp *QP) Negotiated() *mpa.Result {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil || qp.eng.res == nil {
		return nil
	}
	r := *qp.eng.res
	return &r
}
