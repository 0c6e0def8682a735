package pmemsink

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDirtySet_MergesAndRounds(t *testing.T) {
	d := NewDirtySet(8, 64)
	d.Add(100, 10) // [64, 128)
	d.Add(300, 1)  // [256, 320)
	d.Add(128, 1)  // touches the first: [64, 192)
	require.Equal(t, []Range{{64, 128}, {256, 64}}, d.Ranges(nil))
	d.Add(150, 120) // bridges both
	require.Equal(t, []Range{{64, 256}}, d.Ranges(nil))
	d.Add(0, 0)
	require.Equal(t, 1, d.Len())
	require.Equal(t, uint64(256), d.Bytes())
	require.Zero(t, d.Widened())

	d = NewDirtySet(8, 1)
	d.Add(10, 5)
	d.Add(1, 2)
	d.Add(20, 1)
	require.Equal(t, []Range{{1, 2}, {10, 5}, {20, 1}}, d.Ranges(nil))
}

// At its cap the set merges the closest neighbours; nothing is dropped.
func TestDirtySet_WidensAtCap(t *testing.T) {
	d := NewDirtySet(2, 1)
	d.Add(0, 1)
	d.Add(100, 1)
	d.Add(10, 1) // closest to 0: gap 9
	require.Equal(t, []Range{{0, 11}, {100, 1}}, d.Ranges(nil))
	require.Equal(t, uint64(1), d.Widened())
	d.Add(200, 1) // gap 89 (11→100) < 99 (101→200): merge the existing pair
	require.Equal(t, []Range{{0, 101}, {200, 1}}, d.Ranges(nil))
	d.Add(1000, 1) // gap 99 (101→200) < 799 (201→1000)
	require.Equal(t, []Range{{0, 201}, {1000, 1}}, d.Ranges(nil))
	d.Add(1100, 1) // nr joins its left neighbour: gap 99 < 799
	require.Equal(t, []Range{{0, 201}, {1000, 101}}, d.Ranges(nil))
	require.Equal(t, uint64(4), d.Widened())
}

func TestDirtySet_TakeRange(t *testing.T) {
	d := NewDirtySet(4, 1)
	d.Add(0, 10)
	d.Add(20, 10)
	d.Add(40, 10)
	got := d.TakeRange(5, 20, nil) // [5, 25)
	require.Equal(t, []Range{{5, 5}, {20, 5}}, got)
	require.Equal(t, []Range{{0, 5}, {25, 5}, {40, 10}}, d.Ranges(nil))
	require.Empty(t, d.TakeRange(100, 10, nil))
	require.Empty(t, d.TakeRange(10, 0, nil))

	// A range sticking out on both sides splits when there is room...
	d = NewDirtySet(3, 1)
	d.Add(0, 100)
	require.Equal(t, []Range{{40, 10}}, d.TakeRange(40, 10, nil))
	require.Equal(t, []Range{{0, 40}, {50, 50}}, d.Ranges(nil))
	// ...and is taken whole when the set is full.
	d.Add(200, 10)
	require.Equal(t, 3, d.Len())
	require.Equal(t, []Range{{50, 50}}, d.TakeRange(60, 10, nil))
	require.Equal(t, []Range{{0, 40}, {200, 10}}, d.Ranges(nil))

	all := d.TakeAll(nil)
	require.Equal(t, []Range{{0, 40}, {200, 10}}, all)
	require.True(t, d.Empty())
}

func TestDirtySet_DoesNotAllocate(t *testing.T) {
	d := NewDirtySet(16, 64)
	dst := make([]Range, 0, 17)
	rng := rand.New(rand.NewPCG(3, 4))
	n := testing.AllocsPerRun(1000, func() {
		for i := 0; i < 40; i++ {
			d.Add(rng.Uint64N(1<<20), 1+rng.Uint64N(9000))
		}
		dst = d.TakeRange(rng.Uint64N(1<<20), rng.Uint64N(1<<18), dst[:0])
		dst = d.TakeAll(dst[:0])
	})
	require.Zero(t, n)
}

// model is the reference: a bitmap of dirty bytes, rounded as the set
// rounds.
type model struct {
	bits []bool
	g    uint64
}

func (m *model) round(off, n uint64) (uint64, uint64) {
	return alignDown(off, m.g), min(alignUp(off+n, m.g), uint64(len(m.bits)))
}

func (m *model) set(off, n uint64, v bool) {
	if n == 0 {
		return
	}
	s, e := m.round(off, n)
	for i := s; i < e; i++ {
		m.bits[i] = v
	}
}

// checkDirty applies ops (decoded from b) to a set and the model and
// returns the first broken property.
func checkDirty(b []byte, capacity int, g uint64, universe int, drop bool) error {
	d := NewDirtySet(capacity, g)
	d.dropCap = drop
	m := &model{bits: make([]bool, universe), g: g}
	covered := func(rs []Range) []bool {
		c := make([]bool, universe)
		for _, r := range rs {
			for i := r.Off; i < r.End() && i < uint64(universe); i++ {
				c[i] = true
			}
		}
		return c
	}
	invariant := func(step int) error {
		rs := d.Ranges(nil)
		if len(rs) > capacity {
			return fmt.Errorf("step %d: %d ranges over cap %d", step, len(rs), capacity)
		}
		for i, r := range rs {
			if r.Len == 0 || r.Off%g != 0 || r.End()%g != 0 {
				return fmt.Errorf("step %d: range %v empty or not rounded to %d", step, r, g)
			}
			if i > 0 && rs[i-1].End() >= r.Off {
				return fmt.Errorf("step %d: %v and %v overlap or touch", step, rs[i-1], r)
			}
		}
		c := covered(rs)
		for i, dirty := range m.bits {
			if dirty && !c[i] {
				return fmt.Errorf("step %d: dirty byte %d not in the set %v", step, i, rs)
			}
			if !dirty && c[i] && d.Widened() == 0 {
				return fmt.Errorf("step %d: clean byte %d in the set %v without widening", step, i, rs)
			}
		}
		return nil
	}
	for step := 0; len(b) >= 5; step++ {
		op, off, n := b[0]%4, uint64(b[1])|uint64(b[2]&0x0f)<<8, uint64(b[3])|uint64(b[4]&0x07)<<8
		b = b[5:]
		off %= uint64(universe)
		n = min(n, uint64(universe)-off)
		before := covered(d.Ranges(nil))
		switch op {
		case 0, 1:
			d.Add(off, n)
			m.set(off, n, true)
		case 2:
			taken := covered(d.TakeRange(off, n, nil))
			rest := covered(d.Ranges(nil))
			for i := range m.bits {
				if taken[i] && rest[i] {
					return fmt.Errorf("step %d: byte %d both taken and kept", step, i)
				}
				if (taken[i] || rest[i]) && !before[i] {
					return fmt.Errorf("step %d: byte %d invented", step, i)
				}
			}
			qs, qe := m.round(off, n)
			for i := range m.bits {
				in := uint64(i) >= qs && uint64(i) < qe && n > 0
				if m.bits[i] && in && !taken[i] {
					return fmt.Errorf("step %d: dirty byte %d in [%d,+%d) not taken", step, i, off, n)
				}
				// Outside the query a byte may be kept or taken (a full set
				// takes a range that would need splitting), never lost.
				if m.bits[i] && !in && !rest[i] && !taken[i] {
					return fmt.Errorf("step %d: dirty byte %d outside the query lost", step, i)
				}
			}
			for i := range m.bits {
				if taken[i] || (uint64(i) >= qs && uint64(i) < qe && n > 0) {
					m.bits[i] = false
				}
			}
		case 3:
			taken := covered(d.TakeAll(nil))
			for i := range m.bits {
				if taken[i] != before[i] {
					return fmt.Errorf("step %d: TakeAll differs from the set at %d", step, i)
				}
				m.bits[i] = false
			}
			if !d.Empty() {
				return fmt.Errorf("step %d: not empty after TakeAll", step)
			}
		}
		if err := invariant(step); err != nil {
			return err
		}
	}
	return nil
}

// The set against the bitmap model over many random operation sequences,
// for several capacities and granularities.
func TestDirtySet_Model(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seqs := 100
	if raceOn {
		seqs = 15
	}
	for i := 0; i < seqs; i++ {
		b := make([]byte, 5*200)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		for _, cfg := range []struct {
			cap int
			g   uint64
		}{{2, 1}, {3, 8}, {8, 64}, {64, 1}} {
			require.NoError(t, checkDirty(b, cfg.cap, cfg.g, 2048, false), "cap %d g %d seq %d", cfg.cap, cfg.g, i)
		}
	}
}

// The model check is strong enough to see a set that drops a range at its
// cap.
func TestDirtySet_ModelCatchesDropAtCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	caught := false
	for i := 0; i < 50 && !caught; i++ {
		b := make([]byte, 5*100)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		err := checkDirty(b, 3, 1, 2048, true)
		caught = err != nil
		if caught {
			require.ErrorContains(t, err, "not in the set")
		}
	}
	require.True(t, caught)
}

func FuzzDirtySet(f *testing.F) {
	f.Add([]byte{0, 10, 0, 5, 0, 0, 100, 0, 5, 0, 2, 0, 0, 255, 0}, uint8(2), uint8(0))
	f.Add(make([]byte, 50), uint8(3), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, capacity, gshift uint8) {
		if err := checkDirty(b, 2+int(capacity%8), 1<<(gshift%7), 2048, false); err != nil {
			t.Fatal(err)
		}
	})
}
