package pmemsink

// DirtySet holds the ranges of one region that one connection placed and
// that are not yet persisted: sorted, disjoint, never touching (adjacent
// and overlapping ranges are merged), rounded out to a granularity (the
// sink's persist unit), and bounded: it never holds more than its capacity.
// When a new range would exceed the capacity, the two neighbouring ranges
// with the smallest gap between them are merged into one, so the set
// widens (it may then name bytes that are not dirty, which only costs an
// extra persist) and never drops a range.
//
// Its memory is allocated once, by NewDirtySet; Add and the Take methods do
// not allocate when given a dst with room for Cap ranges. A DirtySet is
// not safe for concurrent use; a Tracker wraps one with a lock.
type DirtySet struct {
	r       []Range
	g       uint64
	widened uint64
	dropCap bool // test defect: drop instead of widening (testHooks.dropAtCap)
}

// NewDirtySet returns an empty set of at most capacity ranges (at least 2)
// rounded to granularity bytes (a power of two; 0 or 1 means bytes).
func NewDirtySet(capacity int, granularity uint64) *DirtySet {
	d := &DirtySet{}
	d.init(capacity, granularity)
	return d
}

func (d *DirtySet) init(capacity int, granularity uint64) {
	if granularity == 0 {
		granularity = 1
	}
	if granularity&(granularity-1) != 0 {
		panic("pmemsink: dirty-set granularity is not a power of two")
	}
	d.r = make([]Range, 0, max(capacity, 2))
	d.g = granularity
}

// Cap returns the most ranges the set holds.
func (d *DirtySet) Cap() int { return cap(d.r) }

// Len returns the number of ranges held.
func (d *DirtySet) Len() int { return len(d.r) }

// Empty reports whether nothing is dirty.
func (d *DirtySet) Empty() bool { return len(d.r) == 0 }

// Bytes returns the number of bytes the ranges cover.
func (d *DirtySet) Bytes() uint64 {
	var n uint64
	for _, r := range d.r {
		n += r.Len
	}
	return n
}

// Widened returns how many times the set merged ranges to stay within its
// capacity.
func (d *DirtySet) Widened() uint64 { return d.widened }

// Ranges appends the ranges held, in order, to dst.
func (d *DirtySet) Ranges(dst []Range) []Range { return append(dst, d.r...) }

// round returns [off, off+n) rounded out to the granularity; an end past
// 2^64 saturates.
func (d *DirtySet) round(off, n uint64) (uint64, uint64) {
	e := off + n
	if e < off {
		e = ^uint64(0)
	}
	s := alignDown(off, d.g)
	if up := alignUp(e, d.g); up >= e {
		e = up
	}
	return s, e
}

// firstEndingAtOrAfter returns the index of the first range whose end is
// at least x (len if none).
func (d *DirtySet) firstEndingAtOrAfter(x uint64) int {
	lo, hi := 0, len(d.r)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.r[m].End() < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Add records [off, off+n) as dirty. n = 0 adds nothing.
func (d *DirtySet) Add(off, n uint64) {
	if n == 0 {
		return
	}
	s, e := d.round(off, n)
	i := d.firstEndingAtOrAfter(s) // ranges before i end before s
	j := i
	for j < len(d.r) && d.r[j].Off <= e {
		s, e = min(s, d.r[j].Off), max(e, d.r[j].End())
		j++
	}
	if j > i { // merges with r[i:j]
		d.r[i] = Range{Off: s, Len: e - s}
		d.r = append(d.r[:i+1], d.r[j:]...)
		return
	}
	if len(d.r) < cap(d.r) {
		d.r = append(d.r, Range{})
		copy(d.r[i+1:], d.r[i:])
		d.r[i] = Range{Off: s, Len: e - s}
		return
	}
	if d.dropCap {
		return
	}
	d.widen(i, Range{Off: s, Len: e - s})
}

// widen inserts nr at index i of a full set by merging the closest pair of
// neighbours in the sequence r[:i], nr, r[i:].
func (d *DirtySet) widen(i int, nr Range) {
	d.widened++
	at := func(k int) Range {
		switch {
		case k < i:
			return d.r[k]
		case k == i:
			return nr
		}
		return d.r[k-1]
	}
	n := len(d.r) + 1
	best, bestGap := 0, ^uint64(0)
	for k := 0; k+1 < n; k++ {
		if g := at(k+1).Off - at(k).End(); g < bestGap {
			best, bestGap = k, g
		}
	}
	switch best {
	case i - 1: // nr joins its left neighbour
		d.r[i-1].Len = nr.End() - d.r[i-1].Off
		return
	case i: // nr joins its right neighbour
		d.r[i] = Range{Off: nr.Off, Len: d.r[i].End() - nr.Off}
		return
	}
	// Merge two existing neighbours, freeing a slot, then insert nr.
	k := best
	if best > i {
		k = best - 1
	}
	d.r[k].Len = d.r[k+1].End() - d.r[k].Off
	copy(d.r[k+1:], d.r[k+2:])
	d.r = d.r[:len(d.r)-1]
	if k < i {
		i--
	}
	d.r = append(d.r, Range{})
	copy(d.r[i+1:], d.r[i:])
	d.r[i] = nr
}

// TakeAll moves every range to dst (appended, in order) and empties the set.
func (d *DirtySet) TakeAll(dst []Range) []Range {
	dst = append(dst, d.r...)
	d.r = d.r[:0]
	return dst
}

// TakeRange moves the dirty parts of [off, off+n), rounded out to the
// granularity, to dst and leaves the rest. Where a range sticks out on
// both sides and the set is full, so that leaving both ends would need one
// range more than the capacity, the whole range is taken: persisting more
// is always safe, forgetting is not.
func (d *DirtySet) TakeRange(off, n uint64, dst []Range) []Range {
	if n == 0 || len(d.r) == 0 {
		return dst
	}
	s, e := d.round(off, n)
	i := d.firstEndingAtOrAfter(s + 1) // first range ending after s
	j := i
	for j < len(d.r) && d.r[j].Off < e {
		j++
	}
	if i == j {
		return dst
	}
	first, last := d.r[i], d.r[j-1]
	if j-i == 1 && first.Off < s && first.End() > e && len(d.r) == cap(d.r) {
		dst = append(dst, first)
		d.r = append(d.r[:i], d.r[j:]...)
		return dst
	}
	for k := i; k < j; k++ {
		r := d.r[k]
		ts, te := max(r.Off, s), min(r.End(), e)
		dst = append(dst, Range{Off: ts, Len: te - ts})
	}
	// Remainders: left of s in the first range, right of e in the last.
	var rem [2]Range
	nrem := 0
	if first.Off < s {
		rem[nrem] = Range{Off: first.Off, Len: s - first.Off}
		nrem++
	}
	if last.End() > e {
		rem[nrem] = Range{Off: e, Len: last.End() - e}
		nrem++
	}
	// Replace r[i:j] by rem[:nrem]; j-i ≥ nrem except in the case above
	// with room to grow.
	tail := len(d.r) - j
	newLen := i + nrem + tail
	if newLen > len(d.r) {
		d.r = d.r[:newLen]
	}
	copy(d.r[i+nrem:], d.r[j:j+tail])
	copy(d.r[i:], rem[:nrem])
	d.r = d.r[:newLen]
	return dst
}
