package ddp

import (
	"math"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// NoBuffer is passed to [UntaggedQueue.Receive] as the buffer length when
// no receive buffer is posted.
const NoBuffer = -1

// UntaggedSegment is what the receive checks learned about one untagged
// segment.
type UntaggedSegment struct {
	QN, MSN uint32
	MO      uint32 // offset of the payload in the message (and the buffer)
	Len     int    // payload length
	// First is set on the segment that starts a message: the caller
	// consumes the buffer it offered. Last is set on the final segment.
	First, Last bool
	// MsgLen is the length of the whole message; valid when Last is set.
	MsgLen int
}

// UntaggedQueue is the receive state of one untagged queue (one QN) of a
// DDP stream.
//
// Messages on a queue carry consecutive MSNs, starting at 1 and wrapping
// modulo 2^32 (RFC 5041 §4, the MSN field). Over an
// ordered transport a message's segments arrive in order, so each must
// carry the MSN of the message in progress and an MO equal to the bytes
// already received; a new message must carry the next MSN and MO 0. Linux
// siw checks the same (siw_send_check_ntoh).
//
// It is not safe for concurrent use; one reader goroutine owns it.
type UntaggedQueue struct {
	next     uint32 // MSN of the message in progress, or of the next one
	active   bool
	received uint64 // payload bytes of the message in progress
	bufLen   uint64 // length of the buffer the message is placed into
}

// NewUntaggedQueue returns a queue expecting MSN 1.
func NewUntaggedQueue() UntaggedQueue { return UntaggedQueue{next: 1} }

// NextMSN returns the MSN the queue expects: that of the message in
// progress, or of the next message.
func (q *UntaggedQueue) NextMSN() uint32 { return q.next }

// SetNextMSN makes the queue expect msn next and drops any message in
// progress.
func (q *UntaggedQueue) SetNextMSN(msn uint32) { *q = UntaggedQueue{next: msn} }

// InProgress reports whether a message has begun but not ended.
func (q *UntaggedQueue) InProgress() bool { return q.active }

// Receive checks the untagged header h of a segment of length segLen (DDP
// header plus payload) against the queue and advances it.
//
// bufLen is the length of the buffer the caller would place a new message
// into (the head of its receive queue), or NoBuffer if none is posted. It is
// consulted only when the segment starts a message; a message in progress
// keeps the buffer it started with.
//
// The checks, in order, and their codes (RFC 5041 §7):
//   - DV ≠ 1: 1/2/0x06
//   - segment shorter than the header: 1/0/0x00
//   - MSN not that of the message in progress, or of the next message:
//     1/2/0x03
//   - MO not equal to the bytes already received (0 for a new message):
//     1/2/0x04
//   - a new message and no buffer: 1/2/0x02
//   - MO + payload beyond the buffer: 1/2/0x05 ("DDP Message too long for
//     available buffer"; siw reports 1/2/0x02 here)
//
// The queue number is not checked here; see [UntaggedQueues]. On error the
// state is left unchanged: the stream is about to be terminated.
func (q *UntaggedQueue) Receive(h Untagged, segLen, bufLen int) (UntaggedSegment, error) {
	c := h.Control()
	if c.Version() != Version {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedVersion, h, segLen)
	}
	if c.Tagged() || segLen < UntaggedHeaderLen {
		return UntaggedSegment{}, NewError(termcode.DDPLocalCatastrophic, h, segLen)
	}
	s := UntaggedSegment{
		QN:    h.QN(),
		MSN:   h.MSN(),
		MO:    h.MO(),
		Len:   segLen - UntaggedHeaderLen,
		First: !q.active,
		Last:  c.Last(),
	}
	if s.MSN != q.next {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedMSNRange, h, segLen)
	}
	if uint64(s.MO) != q.received {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedInvalidMO, h, segLen)
	}
	buf := q.bufLen
	if !q.active {
		if bufLen < 0 {
			return UntaggedSegment{}, NewError(termcode.DDPUntaggedNoBuffer, h, segLen)
		}
		buf = uint64(bufLen)
	}
	end := uint64(s.MO) + uint64(s.Len)
	if end > buf || (!s.Last && end > math.MaxUint32) {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedTooLong, h, segLen)
	}
	if s.Last {
		s.MsgLen = int(end)
		*q = UntaggedQueue{next: q.next + 1} // wraps modulo 2^32
	} else {
		q.active, q.received, q.bufLen = true, end, buf
	}
	return s, nil
}

// UntaggedQueues is the untagged receive state of one DDP stream: one
// [UntaggedQueue] per queue number the upper layer defines. RDMAP defines
// QN 0 (Send), 1 (Read Request) and 2 (Terminate); RFC 7306 adds 3.
type UntaggedQueues struct {
	q []UntaggedQueue
}

// NewUntaggedQueues returns state for queue numbers 0 to n-1, each
// expecting MSN 1.
func NewUntaggedQueues(n int) *UntaggedQueues {
	qs := &UntaggedQueues{q: make([]UntaggedQueue, n)}
	for i := range qs.q {
		qs.q[i] = NewUntaggedQueue()
	}
	return qs
}

// Len returns the number of queues.
func (qs *UntaggedQueues) Len() int { return len(qs.q) }

// Queue returns the queue for qn, or nil if qn is not defined.
func (qs *UntaggedQueues) Queue(qn uint32) *UntaggedQueue {
	if uint64(qn) >= uint64(len(qs.q)) {
		return nil
	}
	return &qs.q[qn]
}

// Receive checks the version and queue number of h (an undefined QN is
// 1/2/0x01) and passes the segment to that queue's Receive.
func (qs *UntaggedQueues) Receive(h Untagged, segLen, bufLen int) (UntaggedSegment, error) {
	if h.Control().Version() != Version {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedVersion, h, segLen)
	}
	q := qs.Queue(h.QN())
	if q == nil {
		return UntaggedSegment{}, NewError(termcode.DDPUntaggedInvalidQN, h, segLen)
	}
	return q.Receive(h, segLen, bufLen)
}
