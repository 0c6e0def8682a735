package stag

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// The index space is a two-level radix table: 4096 pages of 4096 slots. A
// lookup is two atomic pointer loads and no lock. Pages are allocated when
// the first region in them is registered and dropped when the last one goes
// (unless allocation is still working in that page), so memory follows the
// number of live regions, not the 16M-entry index space.
const (
	pageBits = 12
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
	numPages = 1 << (IndexBits - pageBits)

	// maxStride bounds the random gap between consecutive indices: a peer
	// that knows one STag cannot compute the next index, and pages stay
	// dense enough to be worth their size.
	maxStride = 16

	// DefaultMaxRegions is the number of regions a Table holds unless
	// WithMaxRegions says otherwise.
	DefaultMaxRegions = 1 << 20
)

type page struct {
	slots [pageSize]atomic.Pointer[Region]
	live  int // guarded by Table.mu
}

// keyPage remembers the last key handed out at each index of a page, so that
// a reused index never gets the key it had before. It is 4.5 KiB per page and
// is kept for the life of the table (at most 18 MiB once allocation has swept
// the whole index space).
type keyPage struct {
	used [pageSize / 64]uint64
	key  [pageSize]uint8
}

// Table is the STag index space of one device. All methods are safe for
// concurrent use.
type Table struct {
	pages [numPages]atomic.Pointer[page]

	mu       sync.Mutex
	keys     [numPages]*keyPage
	spare    *page // an emptied page kept for reuse, so churn does not allocate
	rng      *rand.ChaCha8
	lo, hi   uint32 // indices handed out: [lo, hi]
	cursor   uint32 // the last index handed out (or the random start)
	prev     STag   // the last STag handed out
	havePrev bool
	count    int
	max      int
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
// allocation wrap around and reuse indices quickly.
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
	if span := int(c.hi - c.lo + 1); c.max > span {
		c.max = span
	}
	t := &Table{rng: rand.NewChaCha8(c.seed), lo: c.lo, hi: c.hi, max: c.max}
	// Random start, as siw's xa_alloc_cyclic from a random value.
	t.cursor = t.lo + uint32(t.rng.Uint64()%uint64(t.hi-t.lo+1))
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

// load returns the region published at index, or nil. Lock-free.
func (t *Table) load(index uint32) *Region {
	p := t.pages[(index>>pageBits)&(numPages-1)].Load()
	if p == nil {
		return nil
	}
	return p.slots[index&pageMask].Load()
}

// allocIndex picks the next free index cyclically after the cursor, skipping
// a random stride. Called with t.mu held and t.count < t.max, so a free index
// exists.
func (t *Table) allocIndex() uint32 {
	span := t.hi - t.lo + 1
	step := 1 + uint32(t.rng.Uint64()%maxStride)
	idx := t.lo + (t.cursor-t.lo+step%span)%span
	for {
		p := t.pages[idx>>pageBits].Load()
		if p == nil || p.slots[idx&pageMask].Load() == nil {
			break
		}
		if idx == t.hi {
			idx = t.lo
		} else {
			idx++
		}
	}
	// Leaving a page: drop it if nothing lives in it any more.
	if old := t.cursor >> pageBits; old != idx>>pageBits {
		if p := t.pages[old].Load(); p != nil && p.live == 0 {
			t.dropPage(old, p)
		}
	}
	t.cursor = idx
	return idx
}

// pickKey draws a key for index that differs from the key last handed out
// there, and such that the STag is neither the previous STag + 1 nor the
// previous index's successor with the same key. Called with t.mu held.
func (t *Table) pickKey(index uint32) uint8 {
	kp := t.keys[index>>pageBits]
	i := index & pageMask
	for {
		k := uint8(t.rng.Uint64())
		if kp != nil && kp.used[i/64]&(1<<(i%64)) != 0 && kp.key[i] == k {
			continue
		}
		s := MakeSTag(index, k)
		if t.havePrev && (s == t.prev+1 || s == t.prev+1<<KeyBits) {
			continue
		}
		return k
	}
}

// noteIssued records that s was handed out. Called with t.mu held.
func (t *Table) noteIssued(s STag) {
	pi, i := s.Index()>>pageBits, s.Index()&pageMask
	kp := t.keys[pi]
	if kp == nil {
		kp = new(keyPage)
		t.keys[pi] = kp
	}
	kp.used[i/64] |= 1 << (i % 64)
	kp.key[i] = s.Key()
	t.prev, t.havePrev = s, true
}

// publish makes r visible to lookups at its index. Called with t.mu held.
func (t *Table) publish(r *Region) {
	pi := r.index >> pageBits
	p := t.pages[pi].Load()
	if p == nil {
		if p, t.spare = t.spare, nil; p == nil {
			p = new(page)
		}
		t.pages[pi].Store(p)
	}
	p.slots[r.index&pageMask].Store(r)
	p.live++
	t.count++
}

// unpublish removes the region at index from lookups. Called with t.mu held.
func (t *Table) unpublish(index uint32) {
	pi := index >> pageBits
	p := t.pages[pi].Load()
	p.slots[index&pageMask].Store(nil)
	p.live--
	t.count--
	if p.live == 0 && t.cursor>>pageBits != pi {
		t.dropPage(pi, p)
	}
}

// dropPage unpublishes the empty page p at pi and keeps it as the spare.
// Reusing it under another range is safe: every slot is nil, and a lookup
// still holding p reads nil or, after reuse, a region whose full STag it
// must match, exactly as through the new range. Called with t.mu held.
func (t *Table) dropPage(pi uint32, p *page) {
	t.pages[pi].Store(nil)
	if t.spare == nil {
		t.spare = p
	}
}
