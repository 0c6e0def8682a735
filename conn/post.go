package conn

import (
	"fmt"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// resolve checks sgl against the queue pair's PD and the rights need, and
// takes a reference on each region. On failure no reference is kept.
func (qp *QP) resolve(dst []sgeRef, sgl []SGE, need Access) (int, error) {
	return qp.pd.resolve(dst, sgl, need)
}

// resolve checks sgl against pd and the rights need, and takes a
// reference on each region. On failure no reference is kept.
func (pd *PD) resolve(dst []sgeRef, sgl []SGE, need Access) (int, error) {
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
		b, f := pd.pd.CheckLocal(s.MR.r, uint64(s.Offset), uint64(s.Length), need)
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

// PostRecv posts a receive buffer for one incoming Send. Receives may be
// posted before the queue pair is connected. A queue pair bound to a
// shared receive queue refuses it with ErrQPUsesSRQ (post to the SRQ).
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
	if qp.srq != nil {
		return ErrQPUsesSRQ
	}
	if len(wr.SGL) > qp.caps.MaxRecvSGE {
		return fmt.Errorf("%w: %d SGEs, the queue pair takes %d", ErrInvalidWR, len(wr.SGL), qp.caps.MaxRecvSGE)
	}
	if qp.rq.full() {
		return ErrRQFull
	}
	refs := qp.rq.free()
	n, err := qp.resolve(refs, wr.SGL, LocalWrite)
	if err != nil {
		return err
	}
	if err := qp.rcq.reserve(1); err != nil {
		releaseRefs(refs[:len(wr.SGL)])
		return err
	}
	qp.rq.push(recvWQE{id: wr.ID, nsge: len(wr.SGL), length: n})
	return nil
}

// PostSend posts one send-queue work request. It never blocks on the network.
func (qp *QP) PostSend(wr SendWR) error {
	qp.mu.Lock()
	idle := qp.sq.idle()
	if err := qp.postSendLocked(&wr); err != nil {
		qp.mu.Unlock()
		return err
	}
	qp.sendLocked(idle, wr.Op)
	return nil
}

// PostSendBatch posts several work requests at once (one wake-up of the
// transmitter) and returns how many were posted.
func (qp *QP) PostSendBatch(wrs []SendWR) (int, error) {
	qp.mu.Lock()
	idle := qp.sq.idle()
	var err error
	n := 0
	for n < len(wrs) {
		if err = qp.postSendLocked(&wrs[n]); err != nil {
			break
		}
		n++
	}
	if n == 0 {
		qp.mu.Unlock()
		return 0, err
	}
	qp.sendLocked(idle, wrs[0].Op)
	return n, err
}

// sendLocked gets newly posted work going; it is called with QP.mu held
// and releases it. When the send queue was idle and the transmit token is
// free, the posting goroutine frames the work and writes what the socket
// takes without waiting (no goroutine hand-off, which is most of a small
// message's latency); anything left, and every other case, goes to the
// transmitter goroutine. The token is taken with TryLock under QP.mu, as
// the lock order allows, so that the first message starts in the section
// that posted it rather than in one more.
//
// Posts that follow each other closely (a stream) go to the transmitter
// instead, which writes them with one writev: of a run of posts that find
// the send queue idle less than inlineGap apart, the first is sent at
// once and the rest batched — except the second when the first was an
// RDMA Write and this one is not: a Write and the Send that announces it,
// or the Read or Flush that makes it durable, go out without a hand-off,
// while a stream of Sends or of Writes pays for one system call of its
// own, not two (a second inline Send per run cost the 64-byte Send stream
// a quarter of its rate).
func (qp *QP) sendLocked(idle bool, op Op) {
	e := qp.eng
	if !idle || e == nil || !e.txMu.TryLock() {
		qp.mu.Unlock()
		qp.kick()
		return
	}
	if !e.tx.inlinePost(op) {
		qp.mu.Unlock()
		e.txUnlock()
		qp.kick()
		return
	}
	ok, alive := true, true
	if e.tx.cur == txNone {
		// Not in the middle of a larger message, which fill finishes
		// before it looks for the next.
		ok, alive = e.nextLocked()
	}
	qp.mu.Unlock()
	switch {
	case !alive:
		e.endTxLocked()
	case ok:
		e.transmitNow()
	}
	e.tx.lastIdlePost = nanotime()
	e.txUnlock()
	qp.deliver()
}

// inlinePost counts a post that found the send queue idle into its run
// and reports whether it is sent inline (see sendLocked). Called with the
// transmit token held.
func (tx *txState) inlinePost(op Op) bool {
	now := nanotime()
	if now-tx.lastIdlePost > inlineGap {
		tx.inlineRun = 0
	}
	tx.lastIdlePost = now
	inline := tx.inlineRun == 0 || (tx.inlineRun == 1 && tx.runAfterWrite && op != OpWrite)
	if tx.inlineRun == 0 {
		tx.runAfterWrite = op == OpWrite
	}
	tx.inlineRun++
	return inline
}

// inlineGap is how far apart posts belong to one run (nanoseconds), timed
// from the end of the last inline post: a stream's next post comes within
// a fraction of a microsecond of it, a ping-pong's only after the peer's
// reply. Timed start to start (as it once was, with 8 µs), a loopback
// ping-pong's posts were often closer than the gap, since framing and
// writing make an inline post long (sealing inside TLS even more so), and
// most of them went to the transmitter.
const inlineGap = 2000

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
		case OpSendSE, OpSendSEInv, OpSendImm:
		default:
			return fmt.Errorf("%w: Solicited flag on %v", ErrInvalidWR, op)
		}
	}
	if int(op) >= len(sendOps) {
		return fmt.Errorf("%w: unknown operation %v", ErrInvalidWR, wr.Op)
	}
	if err := qp.checkOpLocked(op, wr); err != nil {
		return err
	}
	if len(wr.SGL) > qp.caps.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs, the queue pair takes %d", ErrInvalidWR, len(wr.SGL), qp.caps.MaxSendSGE)
	}
	if qp.sq.full() {
		return ErrSQFull
	}
	refs := qp.sq.free()
	n, err := qp.resolve(refs, wr.SGL, sendOps[op].need)
	if err != nil {
		return err
	}
	if err := qp.scq.reserve(1); err != nil {
		releaseRefs(refs[:len(wr.SGL)])
		return err
	}
	qp.sq.push(sendWQE{
		id:       wr.ID,
		op:       op,
		wc:       sendOps[op].wc,
		flags:    wr.Flags,
		nsge:     len(wr.SGL),
		length:   n,
		remote:   wr.Remote,
		invSTag:  wr.InvSTag,
		flushLen: wr.FlushLength,
		imm:      wr.Imm,
		atomic:   wr.Atomic,
		bind:     bindOf(wr),
	})
	return nil
}

// checkOpLocked checks what a work request's operation asks of it, and
// that the connected peer negotiated the operation's extension (before
// connecting that is not known yet: the work request then fails when it
// starts).
func (qp *QP) checkOpLocked(op Op, wr *SendWR) error {
	switch op {
	case OpLocalInv:
		if len(wr.SGL) != 0 {
			return fmt.Errorf("%w: local invalidate takes no SGL", ErrInvalidWR)
		}
	case OpBindMW:
		if err := checkBindWR(wr); err != nil {
			return err
		}
	case OpSendImm:
		if len(wr.SGL) != 0 {
			return fmt.Errorf("%w: %v takes no SGL (the immediate data is Imm)", ErrInvalidWR, op)
		}
	case OpFetchAdd, OpCmpSwap:
		// RFC 7306 §5.2.1: the target is one 8-byte aligned word.
		if len(wr.SGL) != 1 || wr.SGL[0].Length != rdmap.ImmediateDataLen {
			return fmt.Errorf("%w: %v takes one 8-byte SGE for the original value", ErrInvalidWR, op)
		}
		if wr.Remote.TO%8 != 0 {
			return fmt.Errorf("%w: %v target %#x is not 8-byte aligned", ErrInvalidWR, op, wr.Remote.TO)
		}
	}
	if x := sendOps[op].ext; x == rdmap.ExtRFC7306 && qp.eng != nil && qp.eng.ext&x == 0 {
		return fmt.Errorf("%w: %v", ErrRFC7306Unsupported, op)
	}
	return nil
}
