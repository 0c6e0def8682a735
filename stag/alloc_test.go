package stag

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func seed(b byte) [32]byte {
	var s [32]byte
	for i := range s {
		s[i] = b + byte(i)
	}
	return s
}

// Properties that hold for every seed: no STag below 0x10000, no STag is the
// previous one plus 1 or plus one index with the same key, and indices are
// spread over the whole index space instead of following each other: every
// sixteenth of the space is used and consecutive indices are almost never
// within the old allocator's stride of 16 (each pair is, with probability
// about 2^-19). TestGuess_NextRegistration measures what this is worth.
func TestAlloc_UniformPlacement(t *testing.T) {
	for _, opt := range []TableOption{nil, WithSeed(seed(1)), WithSeed(seed(2))} {
		var tab *Table
		if opt == nil {
			tab = newTable(t) // crypto/rand seeded
		} else {
			tab = newTable(t, opt)
		}
		pd := tab.NewPD()
		var prev STag
		var sixteenths [16]int
		near, keys := 0, map[uint8]bool{}
		for i := 0; i < 2000; i++ {
			r := register(t, pd, make([]byte, 1), LocalRead, BaseZero())
			s := r.STag()
			require.GreaterOrEqual(t, uint32(s), uint32(0x10000), "%v", s)
			sixteenths[s.Index()>>(IndexBits-4)]++
			keys[s.Key()] = true
			if i > 0 {
				require.NotEqual(t, prev+1, s)
				require.NotEqual(t, prev+1<<KeyBits, s)
				if d := int(s.Index()) - int(prev.Index()); d >= -16 && d <= 16 {
					near++
				}
			}
			prev = s
		}
		for i, n := range sixteenths {
			require.Positive(t, n, "sixteenth %d of the index space never used", i)
		}
		require.Less(t, near, 3, "consecutive registrations close together")
		require.Greater(t, len(keys), 200, "2000 random keys cover most of the 256")
	}
}

// With fixed seeds the outcome is deterministic, so this is not a
// statistical test: different seeds give different STag sequences, equal
// seeds the same.
func TestAlloc_SeedDeterminesSequence(t *testing.T) {
	seq := func(sd [32]byte) []STag {
		tab := newTable(t, WithSeed(sd))
		pd := tab.NewPD()
		var out []STag
		for i := 0; i < 8; i++ {
			out = append(out, register(t, pd, make([]byte, 1), LocalRead, BaseZero()).STag())
		}
		return out
	}
	a, b, a2 := seq(seed(1)), seq(seed(2)), seq(seed(1))
	require.Equal(t, a, a2)
	require.NotEqual(t, a[0].Index(), b[0].Index(), "the start index is random")
	require.NotEqual(t, a, b)
}

// Deregistered-then-reused index: the new registration gets a key that
// differs from the previous one, so the old STag fails.
func TestAlloc_ReusedIndexGetsNewKey(t *testing.T) {
	tab := newTable(t, withIndexRange(0x4242, 0x4242))
	pd, other := tab.NewPD(), tab.NewPD()
	buf := make([]byte, 16)
	r := register(t, pd, buf, allAccess, BaseZero())
	for i := 0; i < 2000; i++ {
		old := r.STag()
		require.NoError(t, r.Deregister())
		p := pd
		if i%2 == 1 {
			p = other
		}
		r = register(t, p, buf, allAccess, BaseZero())
		s := r.STag()
		require.Equal(t, uint32(0x4242), s.Index())
		require.NotEqual(t, old.Key(), s.Key())
		require.NotEqual(t, old+1, s)
		_, f := p.Lookup(old, 0, 1, RemoteRead)
		require.Equal(t, InvalidSTag, f, "the old STag must not reach the new registration")
	}
}

// A narrow range that is partly full: allocation skips the live indices and
// in time uses every index of the range.
func TestAlloc_ReuseVisitsTheWholeRange(t *testing.T) {
	tab := newTable(t, withIndexRange(0x100, 0x107))
	pd := tab.NewPD()
	seen := map[uint32]int{}
	var live []*Region
	for i := 0; i < 800; i++ {
		r := register(t, pd, make([]byte, 1), LocalRead, BaseZero())
		require.True(t, r.STag().Index() >= 0x100 && r.STag().Index() <= 0x107)
		seen[r.STag().Index()]++
		live = append(live, r)
		if len(live) == 5 { // keep the table partly full so draws hit live indices
			require.NoError(t, live[0].Deregister())
			live = live[1:]
		}
	}
	require.Len(t, seen, 8, "allocation visits the whole range")
	require.Equal(t, 4, tab.Len())
}

// A range that is full but for one index: the draws almost always land on
// live indices, and the fallback scan still finds the free one.
func TestAlloc_NearlyFullRange(t *testing.T) {
	tab := newTable(t, WithSeed(seed(3)), withIndexRange(0x100, 0x4ff))
	pd := tab.NewPD()
	var rs []*Region
	for i := 0; i < 0x400; i++ {
		rs = append(rs, register(t, pd, make([]byte, 1), LocalRead, BaseZero()))
	}
	_, err := pd.Register(make([]byte, 1), LocalRead, BaseZero())
	require.ErrorIs(t, err, ErrTableFull)
	for i := 0; i < 200; i++ {
		j := i * 7 % len(rs)
		idx := rs[j].STag().Index()
		require.NoError(t, rs[j].Deregister())
		rs[j] = register(t, pd, make([]byte, 1), LocalRead, BaseZero())
		require.Equal(t, idx, rs[j].STag().Index(), "the only free index")
	}
}

func TestAlloc_TableFull(t *testing.T) {
	tab := newTable(t, WithMaxRegions(3))
	pd := tab.NewPD()
	var rs []*Region
	for i := 0; i < 3; i++ {
		rs = append(rs, register(t, pd, make([]byte, 1), LocalRead, BaseZero()))
	}
	_, err := pd.Register(make([]byte, 1), LocalRead, BaseZero())
	require.ErrorIs(t, err, ErrTableFull)
	require.NoError(t, rs[1].Deregister())
	register(t, pd, make([]byte, 1), LocalRead, BaseZero())

	// A range smaller than the limit fills up at its own size.
	small := newTable(t, withIndexRange(0x200, 0x201))
	spd := small.NewPD()
	register(t, spd, make([]byte, 1), LocalRead, BaseZero())
	register(t, spd, make([]byte, 1), LocalRead, BaseZero())
	_, err = spd.Register(make([]byte, 1), LocalRead, BaseZero())
	require.ErrorIs(t, err, ErrTableFull)
}

func TestNewTable_Options(t *testing.T) {
	for _, o := range []TableOption{
		WithMaxRegions(0), WithMaxRegions(-1), WithMaxRegions(MaxIndex),
		withIndexRange(0, 10), withIndexRange(0x300, 0x200), withIndexRange(0x100, MaxIndex+1),
	} {
		_, err := NewTable(o)
		require.ErrorIs(t, err, ErrBadOption)
	}
	_, err := NewTable(WithMaxRegions(MaxIndex - FirstIndex + 1))
	require.NoError(t, err)
}

// The slot array follows the live regions: it grows while they are
// registered, shrinks back to its minimum once they are gone, and churn on a
// few regions does not make it grow. After every step it has at most 16 slots
// per live region (or minSlots) and is at most half full.
func TestAlloc_TableFollowsLiveRegions(t *testing.T) {
	tab := newTable(t, WithSeed(seed(7)))
	pd := tab.NewPD()
	var rs []*Region
	for i := 0; i < 3*4096; i++ {
		rs = append(rs, register(t, pd, make([]byte, 1), LocalRead, BaseZero()))
		requireProportional(t, tab)
	}
	require.GreaterOrEqual(t, tableSlots(tab), 2*len(rs), "at most half full")
	for _, r := range rs {
		require.NoError(t, r.Deregister())
		requireProportional(t, tab)
	}
	require.Equal(t, minSlots, tableSlots(tab))
	checkTable(t, tab)
	for i := 0; i < 10*4096; i++ {
		r := register(t, pd, make([]byte, 1), LocalRead, BaseZero())
		require.NoError(t, r.Deregister())
	}
	require.Equal(t, minSlots, tableSlots(tab))
	require.Zero(t, tab.Len())
	checkTable(t, tab)
}

func requireProportional(t *testing.T, tab *Table) {
	t.Helper()
	tab.mu.Lock()
	n, used, count := len(tab.slots.Load().slots), tab.used, tab.count
	tab.mu.Unlock()
	require.LessOrEqual(t, n, max(minSlots, 16*count), "slots for %d regions", count)
	require.LessOrEqual(t, 2*used, n, "more than half full")
}

// A retired STag (deregistered, or replaced by Revalidate) is not handed out
// again while it is among the last quarantineLen retired, even in a range so
// narrow that indices come back all the time.
func TestAlloc_RetiredSTagsQuarantined(t *testing.T) {
	for _, lohi := range [][2]uint32{{0x100, 0x100}, {0x100, 0x103}, {0x100, 0x13f}} {
		tab := newTable(t, WithSeed(seed(5)), withIndexRange(lohi[0], lohi[1]))
		pd := tab.NewPD()
		var retired []STag
		issued := func(s STag) {
			for _, x := range retired[max(0, len(retired)-quarantineLen):] {
				if x == s {
					t.Fatalf("retired STag %v handed out again", s)
				}
			}
		}
		var live []*Region
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 20000; i++ {
			switch {
			case len(live) < int(lohi[1]-lohi[0]+1) && rng.IntN(2) == 0:
				r := register(t, pd, make([]byte, 1), allAccess, BaseZero())
				issued(r.STag())
				live = append(live, r)
			case len(live) > 0 && rng.IntN(2) == 0:
				r := live[rng.IntN(len(live))]
				old := r.STag()
				require.NoError(t, r.Invalidate())
				s, err := r.Revalidate()
				require.NoError(t, err)
				issued(s)
				retired = append(retired, old)
			case len(live) > 0:
				j := rng.IntN(len(live))
				retired = append(retired, live[j].STag())
				require.NoError(t, live[j].Deregister())
				live = append(live[:j], live[j+1:]...)
			}
		}
		require.Greater(t, len(retired), 5000)
	}
}
