package conn

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// ErrPeerClosed is QP.Err after the peer closed the connection (TCP FIN at
// an FPDU boundary) without a Terminate.
var ErrPeerClosed = errors.New("iwarp: connection closed by the peer")

// ErrConnectionLost is QP.Err (wrapped with the cause) when the TCP
// connection failed: reset, timed out, or ended in the middle of an FPDU.
var ErrConnectionLost = errors.New("iwarp: connection lost")

const (
	// fpduOverhead is what MPA adds to a ULPDU: length field, pad, CRC.
	fpduOverhead = 2 + 3 + 4
	// Batch limits of one writev.
	maxBatchFPDUs = 320
	maxBatchBytes = 4 << 20
	// readerBuffer is the FPDU reader's buffer; large payloads bypass it.
	readerBuffer = 32 << 10
	// terminateTimeout bounds the write of a Terminate to a peer that does
	// not read.
	terminateTimeout = 2 * time.Second
)

// orqEntry is an RDMA Read Request this side sent and whose response it
// expects (outbound read queue, bounded by the negotiated ORD).
type orqEntry struct {
	sqCtr    uint32 // send-queue counter of the Read work request
	rtr      bool   // an RFC 6581 Read RTR: no work request behind it
	sinkSTag uint32
	sinkTO   uint64
	size     uint32
	received uint32
}

// irqEntry is a peer's RDMA Read Request waiting for its response (inbound
// read queue, bounded by the IRD this side advertised).
type irqEntry struct {
	src      []byte
	sinkSTag uint32
	sinkTO   uint64
}

type txKind uint8

const (
	txNone txKind = iota
	txSQ          // a send-queue message being segmented
	txIRQ         // a Read Response being segmented
)

// engine runs one connection: a receiver goroutine that places inbound
// data and a transmitter goroutine that frames outbound messages.
type engine struct {
	qp       *QP
	c        net.Conn
	res      *mpa.Result
	peerIsGo bool
	mulpdu   int

	r *mpa.Reader
	w *mpa.Writer

	// Transmit state, guarded by txMu. txMu orders bytes onto the socket;
	// MSNs are assigned under it.
	txMu       sync.Mutex
	seg        ddp.Segmenter
	hdr        [rdmap.MaxTerminateLen]byte
	segPayload [][]byte
	pieces     [][]byte
	cur        txKind
	curCtr     uint32 // SQ or IRQ counter of the current message
	sendMSN    uint32
	rreqMSN    uint32
	preferIRQ  bool
	sent       []uint32 // SQ counters of messages whose last FPDU awaits the flush

	// Guarded by qp.mu.
	orq              []orqEntry
	orqHead, orqTail uint32
	ordLimit         int
	irq              []irqEntry
	irqHead, irqNext uint32 // oldest unanswered, next to answer
	irqTail          uint32
	irdLimit         int
	txOpen           bool // the transmitter may send FPDUs
	term             *rdmap.Terminate
	drained          chan struct{} // closed when a draining close may proceed
	drainSignaled    bool
	txTimer          *time.Timer // first-FPDU delay

	// Receive state, owned by the receiver goroutine.
	uq          *ddp.UntaggedQueues
	tr          ddp.TaggedReceiver
	rxHdr       [rdmap.MaxHeaderLen]byte
	rxTerm      [rdmap.MaxTerminateLen]byte
	sawFPDU     bool
	sendRTRWait bool // a zero-length Send RTR is expected first
	rxPend      rxPending

	// dead is set when the connection failed: the transmitter abandons the
	// message it is framing and sends the pending Terminate.
	dead atomic.Bool
	// lastInline is when a posting goroutine last sent inline (nanotime).
	lastInline atomic.Int64

	txDone chan struct{}
	rxDone chan struct{}
}

// rxAction is what a received FPDU does once its CRC is verified.
type rxAction uint8

const (
	rxNothing rxAction = iota
	rxRecvDone
	rxReadDone
	rxQueueRead
	rxTerminate
)

type rxPending struct {
	action  rxAction
	msgLen  int
	flags   WCFlags
	invSTag uint32
	irq     irqEntry
	term    *rdmap.TerminateError
}

func newEngine(qp *QP, c net.Conn, res *mpa.Result, cfg *config, peerIsGo bool) *engine {
	e := &engine{
		qp:         qp,
		c:          c,
		res:        res,
		peerIsGo:   peerIsGo,
		r:          mpa.NewReader(c, mpa.ReaderConfig{CRC: res.CRC, Markers: res.RecvMarkers, BufferSize: readerBuffer}),
		w:          mpa.NewWriter(c, mpa.WriterConfig{CRC: res.CRC, Markers: res.SendMarkers}),
		segPayload: make([][]byte, 0, MaxSGE+1),
		pieces:     make([][]byte, 0, MaxSGE),
		sendMSN:    1,
		rreqMSN:    1,
		sent:       make([]uint32, 0, maxBatchFPDUs),
		uq:         ddp.NewUntaggedQueues(rdmap.NumQueues),
		txDone:     make(chan struct{}),
		drained:    make(chan struct{}),
		rxDone:     make(chan struct{}),
	}
	e.mulpdu = mulpduFor(c, cfg, peerIsGo)

	ord := int(res.ORD)
	if !res.IRDORDKnown {
		ord = int(cfg.peerIRD)
	}
	ord = max(ord, 1) // the Read RTR needs a slot even when ORD is 0
	e.ordLimit = ord
	e.orq = make([]orqEntry, ord)
	ird := int(res.IRD)
	if !res.IRDORDKnown {
		ird = int(cfg.mpa.IRD)
	}
	e.irdLimit = ird
	e.irq = make([]irqEntry, max(ird, 1))
	e.sendRTRWait = res.Role == mpa.Responder && res.P2P && res.RTR == mpa.RTRSend
	return e
}

// mulpduFor picks the largest ULPDU to send: what the options say, else
// 64 KiB-ish between iwarp-go peers, else what fits one TCP segment (siw's
// rule: FPDU = MSS rounded down to 8).
func mulpduFor(c net.Conn, cfg *config, peerIsGo bool) int {
	fpdu := cfg.maxFPDU
	if fpdu == 0 {
		if peerIsGo {
			fpdu = mpa.MaxULPDU + fpduOverhead
		} else if mss := tcpMSS(c); mss > 0 {
			fpdu = mss &^ 7
		} else {
			fpdu = mpa.MaxULPDU + fpduOverhead
		}
	}
	// FPDU = 2 + ULPDU + pad + 4: keep 2+ULPDU a multiple of 4 (no pad).
	ulpdu := (fpdu-4)&^3 - 2
	return min(max(ulpdu, rdmap.ReadRequestHeaderLen+2), mpa.MaxULPDU)
}

// start runs the engine's goroutines.
func (e *engine) start() {
	go e.transmitter()
	go e.receiver()
}

// fail ends the connection because of cause. With term set the transmitter
// sends that Terminate before closing the socket. It is safe to call more
// than once; only the first call counts.
func (e *engine) fail(cause error, term *rdmap.Terminate) {
	qp := e.qp
	qp.mu.Lock()
	if qp.state >= stateError {
		qp.mu.Unlock()
		return
	}
	qp.state = stateError
	qp.err = cause
	e.term = term
	e.dead.Store(true)
	close(qp.done)
	qp.mu.Unlock()
	if term == nil {
		e.c.Close()
	}
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

// finish runs when both goroutines have ended: every outstanding work
// request is flushed and the QP is finished.
func (e *engine) finish() {
	qp := e.qp
	if e.txTimer != nil {
		e.txTimer.Stop()
	}
	qp.mu.Lock()
	cause := qp.err
	// A Read whose response was being placed is ended by the same cause.
	qp.flushLocked(cause)
	for i := range e.irq {
		e.irq[i] = irqEntry{}
	}
	if qp.state == stateClosing || errors.Is(cause, ErrQPClosed) {
		qp.state = stateClosed
	}
	qp.mu.Unlock()
	qp.deliver()
	close(qp.finished)
}
