package crashsim

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Kind is a way an initiator asks for its writes to be made durable.
type Kind uint8

// Kinds of flush.
const (
	// ReadAfterWrite: an RDMA Read, answered once everything its
	// connection wrote before it is persistent (librpma's rpma_flush).
	ReadAfterWrite Kind = iota + 1
	// FlushRange: a Flush Request for a range.
	FlushRange
	// FlushWhole: a Flush Request for the whole region.
	FlushWhole
	// GPSPM: a GPSPM flush request for a range.
	GPSPM
)

var kindNames = [...]string{"?", "read-after-write", "flush-range", "flush-whole", "gpspm"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Ranged reports whether the flush names a range (else it covers all the
// connection wrote).
func (k Kind) Ranged() bool { return k == FlushRange || k == GPSPM }

// FlushID names a flush recorded by Checker.Flush.
type FlushID int

// Checker records what a target did and checks, for every connection, that
// each acknowledged flush covers every byte that connection placed in the
// flush's range before the flush arrived:
//
//   - at the acknowledgement, those bytes are already durable in the
//     shadow (no acknowledgement precedes its persist), and
//   - at the cut, the durable image holds them, or later writes of the same
//     bytes, byte for byte (100 % of acknowledged bytes survive).
//
// Its methods are safe for concurrent use; call them in the order the
// target did the things they record.
type Checker struct {
	mu      sync.Mutex
	sh      *Shadow
	initial []byte
	lastBy  [][]uint32 // per connection and byte: version of its last write
	writes  []write    // version v is writes[v-1]
	flushes []flushRec
	acks    int
	bad     []string
	nbad    int
}

type write struct {
	conn int
	off  uint64
	data []byte
}

type flushRec struct {
	conn   int
	kind   Kind
	lo, hi uint64
	req    []uint32 // lastBy[conn][lo:hi] when the flush arrived
	acked  bool
}

const maxReported = 8

// NewChecker returns a checker for conns connections writing into the
// shadow's region.
func NewChecker(sh *Shadow, conns int) *Checker {
	c := &Checker{sh: sh, lastBy: make([][]uint32, conns)}
	for i := range c.lastBy {
		c.lastBy[i] = make([]uint32, sh.Size())
	}
	if sh.src != nil {
		c.initial = append([]byte(nil), sh.durData...)
	}
	return c
}

// Write records that conn's write of [off, off+n) was placed in the
// working image (the target's placement observer calls it, after the
// placement).
func (c *Checker) Write(conn int, off, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := min(off+n, uint64(c.sh.Size()))
	if off >= end {
		return
	}
	v := uint32(len(c.writes) + 1)
	w := write{conn: conn, off: off}
	if c.sh.src != nil {
		w.data = append([]byte(nil), c.sh.src[off:end]...)
	}
	c.writes = append(c.writes, w)
	lb := c.lastBy[conn]
	for i := off; i < end; i++ {
		lb[i] = v
	}
	c.sh.placed(off, end-off, v)
}

// Flush records that a flush of kind k arrived on conn, after every write
// of conn recorded so far. off and n are the range of ranged kinds.
func (c *Checker) Flush(conn int, k Kind, off, n uint64) FlushID {
	c.mu.Lock()
	defer c.mu.Unlock()
	size := uint64(c.sh.Size())
	lo, hi := uint64(0), size
	if k.Ranged() {
		lo, hi = min(off, size), min(off+n, size)
	}
	c.flushes = append(c.flushes, flushRec{conn: conn, kind: k, lo: lo, hi: hi,
		req: append([]uint32(nil), c.lastBy[conn][lo:hi]...)})
	return FlushID(len(c.flushes) - 1)
}

// Ack records that the target acknowledged flush id (sent the Read
// Response, the Flush Response or the GPSPM response), and checks that the
// bytes it covers are durable now.
func (c *Checker) Ack(id FlushID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := &c.flushes[id]
	if f.acked {
		c.report("flush %d acknowledged twice", id)
		return
	}
	f.acked = true
	c.acks++
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	if b, v, ok := c.firstLost(f); !ok {
		c.report("ack before persist: flush %d (%v, conn %d) acknowledged while byte %d (write %d) is not durable (durable: write %d)",
			id, f.kind, f.conn, b, v, c.sh.durable(b))
	}
}

// firstLost returns the first byte f covers whose durable version is older
// than required. Callers hold both locks.
func (c *Checker) firstLost(f *flushRec) (uint64, uint32, bool) {
	for i, v := range f.req {
		b := f.lo + uint64(i)
		if v != 0 && c.sh.durable(b) < v {
			return b, v, false
		}
	}
	return 0, 0, true
}

// Cut simulates the power cut: the working image is gone and only the
// shadow's durable image remains. It checks that every acknowledged flush
// survived and that the durable image holds, byte for byte, the data of
// the writes its versions name.
func (c *Checker) Cut() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	for id := range c.flushes {
		f := &c.flushes[id]
		if !f.acked {
			continue
		}
		if b, v, ok := c.firstLost(f); !ok {
			c.report("lost at the cut: flush %d (%v, conn %d, [%d, %d)) acknowledged, byte %d (write %d) not durable (durable: write %d)",
				id, f.kind, f.conn, f.lo, f.hi, b, v, c.sh.durable(b))
		}
	}
	if c.sh.src != nil {
		for b := range c.sh.durData {
			v := c.sh.durVer[b]
			want := c.initial[b]
			if v != 0 {
				w := c.writes[v-1]
				want = w.data[uint64(b)-w.off]
			}
			if got := c.sh.durData[b]; got != want {
				c.report("durable byte %d is %#02x, but write %d put %#02x there", b, got, v, want)
				break
			}
		}
	}
	return c.errLocked()
}

// Recovered returns a copy of the durable image (nil for a shadow without
// a working image): what a restart after the cut would read.
func (c *Checker) Recovered() []byte {
	c.sh.mu.Lock()
	defer c.sh.mu.Unlock()
	return append([]byte(nil), c.sh.durData...)
}

// Err returns the violations found so far, or nil.
func (c *Checker) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

func (c *Checker) errLocked() error {
	if c.nbad == 0 {
		return nil
	}
	msg := strings.Join(c.bad, "; ")
	if c.nbad > len(c.bad) {
		msg += fmt.Sprintf("; and %d more", c.nbad-len(c.bad))
	}
	return errors.New("crashsim: " + msg)
}

func (c *Checker) report(format string, args ...any) {
	c.nbad++
	if len(c.bad) < maxReported {
		c.bad = append(c.bad, fmt.Sprintf(format, args...))
	}
}

// Counts returns the numbers of writes, flushes and acknowledgements
// recorded.
func (c *Checker) Counts() (writes, flushes, acks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes), len(c.flushes), c.acks
}
