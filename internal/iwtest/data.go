package iwtest

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Data of a phase (PROTOCOL.md §5, §6): the pattern every source writes
// and every sink checks, and where the pieces of one message lie in a
// local buffer when it is gathered from or scattered into several SGEs.
const (
	MaxSGE    = 6
	sgeGap    = 16
	guardLen  = 64
	guardByte = 0xA5
)

func fmix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

// seed is the pattern seed of the phase (PROTOCOL.md §6).
func (ph phase) seed() uint32 {
	return fmix32(fmix32(fmix32(uint32(ph.test)*256+uint32(ph.dir))+ph.iter) + ph.size)
}

// Pattern is the data of iteration iter, of size bytes, of test t in
// direction dir (0: c2s, 1: s2c): what --print-pattern prints.
func Pattern(t Test, dir uint8, iter, size uint32) []byte {
	b := make([]byte, size)
	patternFill(b, phase{test: t, dir: dir, iter: iter, size: size}.seed(), 0, false)
	return b
}

// patternFill writes message bytes from…from+len(dst) of the pattern
// with the given seed into dst, or their complement.
func patternFill(dst []byte, seed uint32, from int, invert bool) {
	var x byte
	if invert {
		x = 0xff
	}
	m := from
	w := fmix32(seed + uint32(m>>2))
	for i := range dst {
		if m&3 == 0 {
			w = fmix32(seed + uint32(m>>2))
		}
		dst[i] = byte(w>>(8*(m&3))) ^ x
		m++
	}
}

// patternCheck returns the index of the first byte of src that differs
// from the pattern at message offset from, or -1.
func patternCheck(src []byte, seed uint32, from int) int {
	m := from
	w := fmix32(seed + uint32(m>>2))
	for i, b := range src {
		if m&3 == 0 {
			w = fmix32(seed + uint32(m>>2))
		}
		if b != byte(w>>(8*(m&3))) {
			return i
		}
		m++
	}
	return -1
}

// layout places a message in a local buffer. With one piece the message
// lies contiguous at offset 0; with several the pieces are stored in
// reverse order with gaps, so only a correct gather or scatter puts the
// bytes back in order.
type layout struct {
	k    int
	off  [MaxSGE]int
	len  [MaxSGE]int
	span int
}

func makeLayout(size uint32, k int) layout {
	k = max(1, min(k, MaxSGE, int(size)))
	l := layout{k: k}
	base, extra := int(size)/k, int(size)%k
	for j := range k {
		l.len[j] = base
		if j < extra {
			l.len[j]++
		}
	}
	gap := 0
	if k > 1 {
		gap = sgeGap
	}
	loc := 0
	for j := k - 1; j >= 0; j-- {
		l.off[j] = loc
		loc += l.len[j] + gap
	}
	l.span = loc
	return l
}

// need is how many buffer bytes the layout uses, guard included.
func (l *layout) need() int { return l.span + guardLen }

// fill writes the pieces with the pattern (invert: its complement) and
// the gaps and the guard after the span with the guard byte.
func (l *layout) fill(buf []byte, seed uint32, invert bool) {
	b := buf[:l.need()]
	for i := range b {
		b[i] = guardByte
	}
	mo := 0
	for j := range l.k {
		patternFill(buf[l.off[j]:l.off[j]+l.len[j]], seed, mo, invert)
		mo += l.len[j]
	}
}

// check returns nil if the pieces hold the pattern and every byte around
// them still holds the guard byte.
func (l *layout) check(buf []byte, seed uint32) error {
	mo := 0
	for j := range l.k {
		if bad := patternCheck(buf[l.off[j]:l.off[j]+l.len[j]], seed, mo); bad >= 0 {
			return fmt.Errorf("data mismatch at message offset %d", mo+bad)
		}
		mo += l.len[j]
	}
	for j := range l.k {
		end := l.off[j] + l.len[j]
		next := l.need()
		if j > 0 {
			next = l.off[j-1]
		}
		for i := end; i < next; i++ {
			if buf[i] != guardByte {
				return fmt.Errorf("write outside the message at buffer offset %d", i)
			}
		}
	}
	return nil
}

// sges returns one SGE per piece, in message order, into dst.
func (l *layout) sges(dst []conn.SGE, mr *conn.MR) []conn.SGE {
	dst = dst[:0]
	for j := range l.k {
		dst = append(dst, mr.SGE(l.off[j], l.len[j]))
	}
	return dst
}
