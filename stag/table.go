package stag

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Placement and the index structure.
//
// A new region's index is drawn uniformly from the free indices of the whole
// range, so knowing one STag says nothing about where the next one is
// (docs/rfc-notes/stag.md states the expected number of guesses). Uniform
// placement touches the index space everywhere, so the indices cannot live in
// a radix table (one 4096-slot page per region: 32 KiB each); they live in an
// open-addressing hash table with linear probing whose slot array is published
// through one atomic pointer. Lookups load the array and probe it without a
// lock; every change happens under Table.mu. A resize builds a new array and
// publishes it; a lookup still probing the old one reads a frozen but
// consistent snapshot (every region it can reach there has its own state word,
// which is what decides), and the garbage collector keeps the old array alive
// exactly as long as some lookup holds it.
//
// The index itself is the hash: indices are uniformly random, so their low
// bits are too, and the indices of a narrow test range are consecutive and do
// not collide at all. Peers choose which indices are looked up but not where
// regions are placed, so they cannot build long probe sequences.
const (
	// DefaultMaxRegions is the number of regions a Table holds unless
	// WithMaxRegions says otherwise.
	DefaultMaxRegions = 1 << 20

	// minSlots is the smallest slot array. Arrays are powers of two, at most
	// half full (counting deleted slots), so every probe meets a nil slot.
	// A rehash sizes the array to between 3 and 6 slots per live region; it
	// shrinks once fewer than 1 slot in 16 is live.
	minSlots = 16

	// quarantineLen is how many retired STags (deregistered, or replaced by
	// Revalidate) the table refuses to hand out again. It is below 256 minus
	// the other exclusions, so every index always has keys left.
	quarantineLen = 128

	// drawLimit uniform draws that all land on live indices make allocation
	// fall back to picking the r-th free index by a scan (only a table close
	// to full gets there: the chance is fill^64).
	drawLimit = 64
)

// deleted fills the slot of a deregistered region until a rehash or an
// insertion reuses it. A probe passes over it as over any other region: its
// state word (zero) names index 0, which is reserved and never handed out,
// and a lookup of an index-0 STag that stops at it sees a free region and
// fails as it would have anyway. Only nil ends a probe.
var deleted = &Region{index: ^uint32(0)}

// slotArray is one published generation of the hash table: a power-of-two
// number of slots, index i probed from slot i mod len onwards.
type slotArray struct {
	slots []atomic.Pointer[Region]
}

// slotsFor is the array size a rehash picks for n live regions: the smallest
// power of two with at least 3 slots per region.
func slotsFor(n int) int {
	s := minSlots
	for s < 3*n {
		s <<= 1
	}
	return s
}

// quarantine remembers the last quarantineLen retired STags in retirement
// order (ring) and as a set (an open-addressing table of four times the size,
// so that probes stay short; 0, never an issued STag, marks an empty slot).
// 2.5 KiB, allocated at the first retirement. Only used under Table.mu.
type quarantine struct {
	ring [quarantineLen]STag
	n    int // entries in ring
	next int // where the next retirement goes
	set  [4 * quarantineLen]STag
}

const qmask = 4*quarantineLen - 1

// qhome spreads STags over the set (Fibonacci hashing; an STag's low bits are
// its key, so they alone would not do).
func qhome(s STag) uint { return uint((uint64(s) * 0x9E3779B97F4A7C15) >> 55) }

func (q *quarantine) has(s STag) bool {
	if q == nil {
		return false
	}
	for i := qhome(s); ; i++ {
		switch q.set[i&qmask] {
		case s:
			return true
		case 0:
			return false
		}
	}
}

// add quarantines s, which is not in the quarantine (no quarantined STag is
// handed out, so none is retired twice), and releases the oldest entry if the
// ring is full.
func (q *quarantine) add(s STag) {
	if q.n == quarantineLen {
		q.remove(q.ring[q.next])
	} else {
		q.n++
	}
	q.ring[q.next] = s
	q.next = (q.next + 1) % quarantineLen
	i := qhome(s)
	for q.set[i&qmask] != 0 {
		i++
	}
	q.set[i&qmask] = s
}

// remove deletes s from the set by backward shift: each later entry of the
// run moves into the hole if the hole lies on its probe path.
func (q *quarantine) remove(s STag) {
	i := qhome(s)
	for q.set[i&qmask] != s {
		i++
	}
	for j := i + 1; ; j++ {
		x := q.set[j&qmask]
		if x == 0 {
			break
		}
		if (j-qhome(x))&qmask >= (j-i)&qmask {
			q.set[i&qmask] = x
			i = j
		}
	}
	q.set[i&qmask] = 0
}

// Table is the STag index space of one device. All methods are safe for
// concurrent use.
type Table struct {
	slots atomic.Pointer[slotArray]
	// Every lookup reads slots; registration writes the fields below. The
	// pad keeps them off the lookups' cache line.
	_ [64]byte

	mu       sync.Mutex
	used     int // non-nil slots of the current array: live + deleted
	count    int // live regions
	max      int
	rng      *rand.Rand
	keyBits  uint64 // random bytes not yet used as keys
	keyLeft  int    // how many
	lo, span uint32 // indices handed out: [lo, lo+span)
	prev     STag   // the last STag handed out
	havePrev bool
	q        *quarantine
	nextPD   uint32
}

type tableConfig struct {
	max    int
	seed   [32]byte
	seeded bool
	lo, hi uint32
}

// TableOption configures NewTable.
type TableOption func(*tableConfig) error

// WithMaxRegions limits the number of regions registered at once
// (1 ≤ n ≤ the number of usable indices; default DefaultMaxRegions).
func WithMaxRegions(n int) TableOption {
	return func(c *tableConfig) error {
		if n < 1 || n > MaxIndex-FirstIndex+1 {
			return fmt.Errorf("%w: max regions %d out of range", ErrBadOption, n)
		}
		c.max = n
		return nil
	}
}

// WithSeed makes index and key choice a deterministic function of seed, for
// reproducible tests. Without it the table seeds itself from crypto/rand,
// which is what any table reachable from the network must do.
func WithSeed(seed [32]byte) TableOption {
	return func(c *tableConfig) error {
		c.seed, c.seeded = seed, true
		return nil
	}
}

// withIndexRange narrows the indices handed out, so that tests can make
// allocation reuse indices quickly.
func withIndexRange(lo, hi uint32) TableOption {
	return func(c *tableConfig) error {
		if lo < FirstIndex || hi > MaxIndex || lo > hi {
			return fmt.Errorf("%w: index range [%#x, %#x]", ErrBadOption, lo, hi)
		}
		c.lo, c.hi = lo, hi
		return nil
	}
}

// NewTable creates an empty STag index space.
func NewTable(opts ...TableOption) (*Table, error) {
	c := tableConfig{max: DefaultMaxRegions, lo: FirstIndex, hi: MaxIndex}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if !c.seeded {
		// crypto/rand.Read does not fail on supported platforms (Go ≥ 1.24).
		_, _ = crand.Read(c.seed[:])
	}
	span := c.hi - c.lo + 1
	if c.max > int(span) {
		c.max = int(span)
	}
	t := &Table{rng: rand.New(rand.NewChaCha8(c.seed)), lo: c.lo, span: span, max: c.max}
	t.slots.Store(&slotArray{slots: make([]atomic.Pointer[Region], minSlots)})
	return t, nil
}

// NewPD creates a protection domain in the table.
func (t *Table) NewPD() *PD {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextPD++
	return &PD{t: t, id: t.nextPD}
}

// Len returns the number of registered regions.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count
}

// find returns the region whose STag is s with its state word, or the
// deleted sentinel and 0 if there is none. Lock-free: one atomic load of the
// array, then atomic loads of slots from the index's home slot to the region
// or to a nil slot. The whole STag is compared, so that the common case costs
// one comparison; a wrong key just probes on to the next nil slot, since no
// other region has the index. The word read to compare is the one the caller
// checks the state in. Callers need no nil check: the zero word is a free
// region at the reserved index 0, which fails every check a free region
// fails.
func (t *Table) find(s STag) (*Region, uint64) {
	slots := t.slots.Load().slots
	for i := uint(s >> KeyBits); ; i++ {
		r := slots[i&uint(len(slots)-1)].Load()
		if r == nil {
			return deleted, 0
		}
		if w := r.word.Load(); STag(w>>stagShift) == s {
			return r, w
		}
	}
}

// load returns the region published at index, or nil. For the writers.
func (t *Table) load(index uint32) *Region {
	slots := t.slots.Load().slots
	mask := uint32(len(slots) - 1)
	for i := index; ; i++ {
		if r := slots[i&mask].Load(); r == nil || r.index == index {
			return r
		}
	}
}

// allocIndex draws an index uniformly from the free indices of the range.
// Called with t.mu held and t.count < t.max, so a free index exists.
func (t *Table) allocIndex() uint32 {
	for range drawLimit {
		if idx := t.lo + t.rng.Uint32N(t.span); t.load(idx) == nil {
			return idx
		}
	}
	// Every draw hit a live region: pick the r-th free index instead, which
	// is just as uniform. Only a nearly full table gets here.
	r := t.rng.Uint32N(t.span - uint32(t.count))
	for idx := t.lo; ; idx++ {
		if t.load(idx) == nil {
			if r == 0 {
				return idx
			}
			r--
		}
	}
}

// pickKey draws a key for index such that the STag is not in the quarantine,
// has not the key cur (when cur ≥ 0: the region's current key, on
// Revalidate), and is neither the previous STag + 1 nor the previous index's
// successor with the same key. At most quarantineLen + 3 of the 256 keys are
// excluded, so the loop ends. Called with t.mu held.
func (t *Table) pickKey(index uint32, cur int) uint8 {
	for {
		if t.keyLeft == 0 {
			t.keyBits, t.keyLeft = t.rng.Uint64(), 8
		}
		k := uint8(t.keyBits)
		t.keyBits >>= 8
		t.keyLeft--
		s := MakeSTag(index, k)
		switch {
		case int(k) == cur,
			t.havePrev && (s == t.prev+1 || s == t.prev+1<<KeyBits),
			t.q.has(s):
			continue
		}
		return k
	}
}

// noteIssued records that s was handed out. Called with t.mu held.
func (t *Table) noteIssued(s STag) { t.prev, t.havePrev = s, true }

// retire puts an STag that stops naming its region in the quarantine, so
// that it is not handed out again soon. Called with t.mu held.
func (t *Table) retire(s STag) {
	if t.q == nil {
		t.q = new(quarantine)
	}
	t.q.add(s)
}

// publish makes r visible to lookups at its index, which must not be live.
// Called with t.mu held.
func (t *Table) publish(r *Region) {
	a := t.slots.Load()
	if 2*(t.used+1) > len(a.slots) {
		a = t.rehash(t.count + 1)
	}
	mask := uint32(len(a.slots) - 1)
	for i := r.index; ; i++ {
		p := &a.slots[i&mask]
		switch p.Load() {
		case nil:
			t.used++
		case deleted:
		default:
			continue
		}
		p.Store(r)
		t.count++
		return
	}
}

// unpublish removes r from lookups. Called with t.mu held.
func (t *Table) unpublish(r *Region) {
	a := t.slots.Load()
	mask := uint32(len(a.slots) - 1)
	i := r.index
	for x := a.slots[i&mask].Load(); x != r; x = a.slots[i&mask].Load() {
		if x == nil {
			panic("stag: registered region missing from its table")
		}
		i++
	}
	t.count--
	// A deleted slot followed by a nil slot ends every probe that reaches
	// it, so it can be nil itself; so can the deleted slots before it. No
	// live region lies beyond a nil slot on its probe path, so this never
	// hides one from a lookup.
	if a.slots[(i+1)&mask].Load() == nil {
		for {
			a.slots[i&mask].Store(nil)
			t.used--
			i--
			if a.slots[i&mask].Load() != deleted {
				break
			}
		}
	} else {
		a.slots[i&mask].Store(deleted)
	}
	if len(a.slots) > minSlots && 16*t.count < len(a.slots) {
		t.rehash(t.count)
	}
}

// rehash copies the live regions into a new array sized for n and publishes
// it. Lookups that loaded the old array finish on it: it is no longer
// written, and whatever they find there is checked against the region's own
// state word. Called with t.mu held.
func (t *Table) rehash(n int) *slotArray {
	old := t.slots.Load()
	a := &slotArray{slots: make([]atomic.Pointer[Region], slotsFor(n))}
	mask := uint32(len(a.slots) - 1)
	for j := range old.slots {
		r := old.slots[j].Load()
		if r == nil || r == deleted {
			continue
		}
		i := r.index
		for a.slots[i&mask].Load() != nil {
			i++
		}
		a.slots[i&mask].Store(r)
	}
	t.used = t.count
	t.slots.Store(a)
	return a
}
