package conn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// ErrPeerClosed is QP.Err after the peer closed the connection (TCP FIN at
// an FPDU boundary) without a Terminate.
var ErrPeerClosed = errors.New("iwarp: connection closed by the peer")

// ErrConnectionLost is QP.Err (wrapped with the cause) when the TCP
// connection failed: reset, timed out, or ended in the middle of an FPDU.
var ErrConnectionLost = errors.New("iwarp: connection lost")

const (
	// markerInterval is the distance between MPA markers (RFC 5044 §4.3).
	markerInterval = 512
	// Batch limits of one writev.
	maxBatchFPDUs = 320
	maxBatchBytes = 4 << 20
	// maxBatchStaged bounds the payload copied for one writev (stageFor):
	// the copies are taken from a shared pool and given back after it.
	maxBatchStaged = 256 << 10
	// readerBuffer is the FPDU reader's buffer; large payloads bypass it.
	readerBuffer = 32 << 10
	// terminateTimeout bounds the write of a Terminate to a peer that does
	// not read, and a write that was under way when the connection failed.
	terminateTimeout = 2 * time.Second
)

// engine runs one connection. Its state is split by owner (doc.go, "Locks
// and ownership"): the receive token (rxMu) owns rx and the reader, the
// transmit token (txMu) owns tx and the writer, and QP.mu guards the queues
// both share. Whoever holds a token does that role's work; the receiver
// and transmitter goroutines are the usual holders, not the only ones.
type engine struct {
	qp       *QP
	c        net.Conn
	res      *mpa.Result
	peerIsGo bool
	ext      rdmap.Extensions // what both sides declared (peer.go)
	mulpdu   int

	rxMu sync.Mutex // the receive token
	rx   rxState

	txMu sync.Mutex // the transmit token
	tx   txState

	// Guarded by QP.mu.
	orq     outboundReads
	irq     inboundReads
	release []*stag.Region // regions of Read Responses framed, to release after the flush
	txOpen  bool           // the transmitter may send FPDUs
	term    *rdmap.Terminate
	rxEnded bool // the receive role is over: no one reads the socket again
	txEnded bool // the transmit role is over: the socket is closed
	drained chan struct{}
	drainOK bool // drained is closed
	txTimer *time.Timer

	// dead is set when the connection failed: token holders stop their
	// work and end their role.
	dead atomic.Bool
	// txRunning is set while a transmitter goroutine runs (QP.kick,
	// transmitter); txStarts counts the goroutines started (tests look).
	txRunning atomic.Bool
	txStarts  atomic.Int64
	// revoking is a region whose invalidation is under way: a placement
	// into it that the deadline cut short ends the stream (revoke).
	revoking atomic.Pointer[stag.Region]
	// placing is the region the receive token holder is placing into (it
	// holds a remote reference on it), published for revokeRemote.
	placing atomic.Pointer[stag.Region]
	// cutMu orders revoke's deadline, set to cut a placement, with
	// endPlacing's clearing of it once the placement is over.
	cutMu sync.Mutex
	// rxDeadline is the read deadline the receive token holder set for
	// itself (a graceful close's, receiveUntil); zero: none. Owned by the
	// receive token.
	rxDeadline time.Time

	// Receiving in CQ.Wait (waitrx.go).
	pokeMu    sync.Mutex   // held by a poke while it sets its deadline
	await     atomic.Int32 // awaitNone, awaitOn or awaitCut (waitrx.go)
	poked     atomic.Bool  // a completion was pushed since the holder last looked
	waitBegan atomic.Bool  // a CQ.Wait began since the receiver last looked
	standByAt int          // index in the stand-by set while the receiver stands by (its lock)
	// Owned by the receive token: the context whose ending pokes a
	// Wait (watchContext), and whether the socket takes deadlines (0:
	// not known yet, 1 yes, -1 no).
	waitDone  <-chan struct{}
	waitStop  func() bool
	deadlines int8
	resume    chan struct{} // capacity 1: a waiter handed the socket back
	waitRx    atomic.Int64  // FPDUs CQ.Wait received (tests look)
	wokenRx   atomic.Int64  // times a standing-by receiver was woken (tests look)

	log   *slog.Logger          // nil: no tracing
	onEnd func(net.Addr, error) // the listener that accepted it, told at the end
	idle  time.Duration         // WithIdleTimeout; 0: never
	act   atomic.Int64          // nanotime of the last FPDU sent or received (idle only)
	idleT *time.Timer

	// tlsw is the TLS stream with a write-behind layer beneath it, nil
	// without one: inline sends go through tlsConn.tryFlush, and the
	// transmitter drains the layer's backlog.
	tlsw *tlsConn
}

func newEngine(qp *QP, c net.Conn, res *mpa.Result, cfg *config, peer peerInfo) *engine {
	peerIsGo := peer.isGo
	e := &engine{
		qp:       qp,
		c:        c,
		res:      res,
		peerIsGo: peerIsGo,
		ext:      peer.extensions(),
		drained:  make(chan struct{}),
		resume:   make(chan struct{}, 1),
	}
	e.mulpdu = mulpduFor(c, cfg, peerIsGo, res.SendMarkers)
	e.rx.init(c, res, e.ext)
	e.tx.init(c, res)
	if t := tlsOf(c); t != nil && t.wb != nil {
		e.tlsw = t
		t.wb.notify(qp.kick)
	}
	ord := int(res.ORD)
	if !res.IRDORDKnown {
		ord = int(cfg.peerIRD)
	}
	e.orq = newOutboundReads(ord)
	ird := int(res.IRD)
	if !res.IRDORDKnown {
		ird = int(cfg.mpa.IRD)
	}
	e.irq = newInboundReads(ird)
	e.release = make([]*stag.Region, 0, max(ird, 1))
	e.rx.sendRTRWait = res.Role == mpa.Responder && res.P2P && res.RTR == mpa.RTRSend
	e.log, e.idle = cfg.logger, cfg.idleTimeout
	return e
}

// MULPDU bounds (RFC 5044 §3: "The range of MULPDU values MUST be between
// 128 octets and 64768 octets, inclusive"; the sending DDP "MUST NOT post
// a ULPDU larger than 64768 octets").
const (
	minMULPDU = 128
	maxMULPDU = 64768
	// The FPDU sizes WithMaxFPDU takes: those whose ULPDU falls in range.
	minFPDU = 2 + minMULPDU + 2 + 4 // 136; pad keeps 2 + ULPDU a multiple of 4
	maxFPDU = 2 + maxMULPDU + 2 + 4 // 64776
)

// mulpduFor picks the largest ULPDU to send: what the options say, else
// the largest the RFC allows between iwarp-go peers, else what fits one
// TCP segment (fpduForMSS). With markers the FPDU on the wire grows by 4
// octets every 512 (RFC 5044 §4.3), which the size leaves room for.
func mulpduFor(c net.Conn, cfg *config, peerIsGo, markers bool) int {
	fpdu := cfg.maxFPDU
	if fpdu == 0 {
		if peerIsGo || tlsOf(c) != nil {
			// Inside TLS, FPDUs cannot line up with segments anyway.
			fpdu = maxFPDU
		} else {
			fpdu = fpduForMSS(tcpMSS(c))
		}
	}
	if markers {
		fpdu -= 4 * (fpdu/markerInterval + 1)
	}
	// FPDU = 2 + ULPDU + pad + 4: keep 2+ULPDU a multiple of 4 (no pad).
	ulpdu := (fpdu-4)&^3 - 2
	limit := maxMULPDU
	if markers {
		limit = min(limit, mpa.MaxULPDUWithMarkers)
	}
	return min(max(ulpdu, minMULPDU), limit)
}

// fpduForMSS is the FPDU size toward a peer that is not iwarp-go, for a
// TCP maximum segment size read at connection set-up (0: unknown): one
// segment's worth, rounded down to 8 (siw's rule; for an MSS that is a
// multiple of 4 the ULPDU is RFC 5044 §4.5's EMSS − 6), so that a segment
// ends where an FPDU does.
//
// An MSS above half the largest FPDU is not a segment size but Linux's
// bound on a young connection (tcp_bound_to_half_wnd: half the largest
// window the peer has offered, so half its 64 KiB SYN window on loopback).
// siw reads the MSS as each message starts, once the window has grown,
// and sends its loopback FPDUs whole-MSS (ULPDU 65474). Taking that half
// would give 32768-octet FPDUs instead: twice as many, and two of them
// end exactly 64 KiB past a message's start, where a 65535-octet window
// without scaling (QEMU's user network, docs/interop.md item 7) cuts the
// stream one octet short, inside the second FPDU's CRC. Segments that
// large fit the largest FPDU, so it is the one sent.
func fpduForMSS(mss int) int {
	if mss <= 0 || mss > maxFPDU/2 {
		return maxFPDU
	}
	return mss &^ 7
}

// start runs the engine's goroutines.
func (e *engine) start() {
	e.qp.pd.track(e)
	if e.idle > 0 {
		e.act.Store(nanotime())
		e.idleT = time.AfterFunc(e.idle, e.checkIdle)
	}
	if e.log != nil {
		r := e.res
		e.log.LogAttrs(context.Background(), slog.LevelInfo, "iwarp: connected",
			slog.Uint64("qpn", uint64(e.qp.qpn)), slog.String("remote", addrString(e.c.RemoteAddr())),
			slog.String("role", r.Role.String()), slog.Bool("crc", r.CRC), slog.Bool("iwarp_go_peer", e.peerIsGo),
			slog.Int("ird", e.irq.limit), slog.Int("ord", e.orq.limit), slog.Int("mulpdu", e.mulpdu))
	}
	e.qp.scq.attach(e)
	e.qp.rcq.attach(e)
	go e.receiver() // the transmitter runs when kicked (QP.kick)
}

// ErrIdleTimeout is QP.Err after WithIdleTimeout closed a connection on
// which nothing was sent or received for that long.
var ErrIdleTimeout = errors.New("iwarp: connection idle for longer than its idle timeout")

// active notes traffic for the idle timeout.
func (e *engine) active() {
	if e.idle > 0 {
		e.act.Store(nanotime())
	}
}

func (e *engine) checkIdle() {
	quiet := time.Duration(nanotime() - e.act.Load())
	if quiet >= e.idle {
		e.fail(ErrIdleTimeout, nil)
		return
	}
	e.idleT.Reset(e.idle - quiet)
}

// fail ends the connection because of cause. With term set, the Terminate
// goes out (if the stream allows it) before the socket is closed: a write
// under way gets terminateTimeout to finish, then is cut. It is safe to
// call more than once and from any goroutine that holds no QP.mu; only the
// first call counts.
func (e *engine) fail(cause error, term *rdmap.Terminate) {
	e.failWithin(cause, term, terminateTimeout)
}

// failWithin is fail with the time a write under way may still take.
func (e *engine) failWithin(cause error, term *rdmap.Terminate, grace time.Duration) {
	qp := e.qp
	qp.mu.Lock()
	if qp.state >= stateError {
		qp.mu.Unlock()
		return
	}
	qp.setState(stateError, cause)
	e.term = term
	e.dead.Store(true)
	qp.mu.Unlock()
	if e.log != nil {
		e.log.LogAttrs(context.Background(), slog.LevelInfo, "iwarp: connection ending",
			slog.Uint64("qpn", uint64(qp.qpn)), slog.String("cause", cause.Error()), slog.Bool("terminate", term != nil))
	}
	if term == nil {
		e.c.Close() // nothing will be sent: cut every read and write now
	} else {
		now := time.Now()
		e.c.SetWriteDeadline(now.Add(grace))
		e.c.SetReadDeadline(now) // the receive role stops at once
	}
	e.tryEnd()
	qp.kick()
}

// failTerminate ends the connection because of a protocol error err found
// here: the peer is sent the Terminate err calls for, and QP.Err is the
// local *rdmap.TerminateError.
func (e *engine) failTerminate(err error) {
	te := rdmap.LocalTerminateError(err)
	t := te.Terminate
	e.fail(te, &t)
}

// tryEnd ends whichever role's token is free. A token held by another
// goroutine is ended by its holder, which checks dead when it lets go
// (rxUnlock, txUnlock).
func (e *engine) tryEnd() {
	if e.txMu.TryLock() {
		e.endTxLocked()
		e.txMu.Unlock()
	}
	if e.rxMu.TryLock() {
		e.endRxLocked()
		e.rxMu.Unlock()
	}
}

// txUnlock gives the transmit token back. If the connection failed while
// it was held, the role ends now: the check after the unlock pairs with
// fail's TryLock, so one of the two always sees the other.
func (e *engine) txUnlock() {
	e.tx.nothingMore = false
	e.txMu.Unlock()
	if e.dead.Load() && e.txMu.TryLock() {
		e.endTxLocked()
		e.txMu.Unlock()
	}
}

// rxUnlock gives the receive token back; see txUnlock.
func (e *engine) rxUnlock() {
	e.rxMu.Unlock()
	if e.dead.Load() && e.rxMu.TryLock() {
		e.endRxLocked()
		e.rxMu.Unlock()
	}
}

// endTxLocked ends the transmit role of a failed connection: what is
// queued and unwritten is dropped (with the region references behind it),
// the pending Terminate is sent if the stream stands at an FPDU boundary,
// and the socket is closed. Called with txMu held; idempotent.
func (e *engine) endTxLocked() {
	qp := e.qp
	qp.mu.Lock()
	if e.txEnded || !e.dead.Load() {
		qp.mu.Unlock()
		return
	}
	term := e.term
	e.term = nil
	qp.mu.Unlock()

	atBoundary := e.tx.abandon()
	qp.mu.Lock()
	e.releaseTxRegionsLocked()
	qp.mu.Unlock()

	if term != nil {
		var sendErr error
		if atBoundary {
			if sendErr = e.tx.sendTerminate(e.c, term); sendErr == nil {
				qp.stats.termTx.add(term.Code)
				qp.stats.countTx(rdmap.OpTerminate, term.Len())
			}
		} else {
			sendErr = errMidFPDU
		}
		qp.mu.Lock()
		qp.err = terminateDelivered(qp.err, sendErr)
		qp.mu.Unlock()
	}
	e.c.Close()
	qp.mu.Lock()
	e.txEnded = true
	both := e.rxEnded
	qp.mu.Unlock()
	if both {
		e.finish()
	}
	qp.kick() // a running transmitter goroutine looks again and exits
}

// errMidFPDU is why a Terminate could not be sent: a write cut short left
// part of an FPDU on the stream, after which no FPDU can follow.
var errMidFPDU = errors.New("the stream stopped in the middle of an FPDU")

// terminateDelivered returns err with the Terminate it reports marked as
// sent (sendErr nil) or not. The error value is replaced, not changed:
// whoever read it before keeps what they read.
func terminateDelivered(err, sendErr error) error {
	var te *rdmap.TerminateError
	if !errors.As(err, &te) || te.Remote || te.Delivery != rdmap.DeliveryPending {
		return err
	}
	c := *te
	if sendErr == nil {
		c.Delivery = rdmap.DeliverySent
	} else {
		c.Delivery, c.DeliveryErr = rdmap.DeliveryFailed, sendErr
	}
	return &c
}

// releaseTxRegionsLocked drops every region reference the transmit side
// holds: framed responses awaiting their flush and queued ones.
func (e *engine) releaseTxRegionsLocked() {
	for i, r := range e.release {
		r.ReleaseRemote()
		e.release[i] = nil
	}
	e.release = e.release[:0]
	e.irq.drop()
}

// endRxLocked ends the receive role of a failed connection. Called with
// rxMu held; idempotent.
func (e *engine) endRxLocked() {
	if e.dead.Load() {
		e.unwatchContext()
	}
	qp := e.qp
	qp.mu.Lock()
	if e.rxEnded || !e.dead.Load() {
		qp.mu.Unlock()
		return
	}
	e.rxEnded = true
	both := e.txEnded
	qp.mu.Unlock()
	if both {
		e.finish()
	}
}

// finish runs once both roles have ended: every outstanding work request
// is flushed and the queue pair is closed. Completions for handlers are
// pending; the goroutine that called finish delivers them once it holds no
// lock.
func (e *engine) finish() {
	qp := e.qp
	if e.txTimer != nil {
		e.txTimer.Stop()
	}
	if e.idleT != nil {
		e.idleT.Stop()
	}
	qp.mu.Lock()
	e.releaseTxRegionsLocked()
	qp.flushInErrorLocked(qp.err)
	err := qp.err
	qp.mu.Unlock()
	// Everything that reports the end happens before the queue pair is
	// closed, so that whoever waited for Close sees it done.
	qp.stats.closed.Add(1)
	qp.scq.detach(e)
	qp.rcq.detach(e)
	qp.pd.untrack(e)
	qp.pd.dev.closedQP(qp)
	if e.log != nil {
		e.log.LogAttrs(context.Background(), slog.LevelInfo, "iwarp: closed",
			slog.Uint64("qpn", uint64(qp.qpn)), slog.String("reason", err.Error()))
	}
	if e.onEnd != nil {
		e.onEnd(e.c.RemoteAddr(), err)
	}
	qp.mu.Lock()
	qp.setState(stateClosed, err)
	qp.mu.Unlock()
}

// signalDrained tells a graceful Close that the send side is idle. Called
// with QP.mu held.
func (e *engine) signalDrained() {
	if !e.drainOK {
		e.drainOK = true
		close(e.drained)
	}
}
