package pmemsink

// Range is the half-open byte range [Off, Off+Len) of a region.
type Range struct {
	Off, Len uint64
}

// End returns Off + Len.
func (r Range) End() uint64 { return r.Off + r.Len }

// alignDown and alignUp round to a power of two a.
func alignDown(x, a uint64) uint64 { return x &^ (a - 1) }
func alignUp(x, a uint64) uint64   { return (x + a - 1) &^ (a - 1) }

// span is the range [off, end) rounded out to the granularity g, the end
// clamped to limit.
func span(off, end, g, limit uint64) (uint64, uint64) {
	s, e := alignDown(off, g), alignUp(end, g)
	if e > limit {
		e = limit
	}
	return s, e
}
