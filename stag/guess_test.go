package stag

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A guessing attacker holds one region of a PD (it knows that STag) and wants
// the STag of the region registered right after it. Each strategy below is a
// fixed order of guesses derived from the attacker's own STag; the number of
// guesses it needs for a given target is the target's position in that order
// (rank). Ranks are computed in closed form, because the orders span the
// whole 2^32 STag space; TestGuess_RankCountsGuesses checks them against
// guesses actually made through Lookup on a narrow range.
type strategy struct {
	name string
	// guess returns the n-th guess (0-based) of an attacker holding own in a
	// range of span indices starting at lo.
	guess func(own STag, lo, span uint32, n uint64) STag
	// rank returns the 1-based position of target among the guesses.
	rank func(own, target STag, lo, span uint32) uint64
}

// nearPos orders the indices other than own's by distance from it, forwards
// first: own+1, own−1, own+2, own−2, … (cyclically in the range).
func nearPos(own, x, lo, span uint32) uint64 {
	fwd := (x - own + span) % span // 1 … span−1
	bwd := span - fwd
	if fwd <= bwd {
		return 2 * uint64(fwd-1)
	}
	return 2*uint64(bwd-1) + 1
}

// nearIndex is the inverse of nearPos.
func nearIndex(own, lo, span uint32, p uint64) uint32 {
	d := uint32(p/2) + 1
	if p%2 == 0 {
		return lo + (own-lo+d)%span
	}
	return lo + (own-lo+span-d)%span
}

func keyPos(own, k uint8) uint64 { return uint64(k - own) }

var strategies = []strategy{
	{
		// The attack that worked against the stride allocator: the indices
		// just after one's own, every key of each.
		name: "forward, every key",
		guess: func(own STag, lo, span uint32, n uint64) STag {
			i := lo + (own.Index()-lo+1+uint32(n/256))%span
			return MakeSTag(i, own.Key()+uint8(n))
		},
		rank: func(own, tg STag, lo, span uint32) uint64 {
			fwd := (tg.Index() - own.Index() + span) % span
			return uint64(fwd-1)*256 + keyPos(own.Key(), tg.Key()) + 1
		},
	},
	{
		name: "nearest index first, every key",
		guess: func(own STag, lo, span uint32, n uint64) STag {
			return MakeSTag(nearIndex(own.Index(), lo, span, n/256), own.Key()+uint8(n))
		},
		rank: func(own, tg STag, lo, span uint32) uint64 {
			return nearPos(own.Index(), tg.Index(), lo, span)*256 + keyPos(own.Key(), tg.Key()) + 1
		},
	},
	{
		// Betting on keys related to one's own: every index with the same
		// key first, then key+1, and so on.
		name: "own key first, nearest index first",
		guess: func(own STag, lo, span uint32, n uint64) STag {
			per := uint64(span - 1)
			return MakeSTag(nearIndex(own.Index(), lo, span, n%per), own.Key()+uint8(n/per))
		},
		rank: func(own, tg STag, lo, span uint32) uint64 {
			return keyPos(own.Key(), tg.Key())*uint64(span-1) + nearPos(own.Index(), tg.Index(), lo, span) + 1
		},
	},
}

// The closed-form ranks are the number of Lookups an attacker following the
// order really needs: on a range of 64 indices (16,384 STags) the guesses are
// made one by one against the table until one succeeds.
func TestGuess_RankCountsGuesses(t *testing.T) {
	const lo, hi = 0x5000, 0x503f
	tab := newTable(t, WithSeed(seed(21)), withIndexRange(lo, hi))
	pd := tab.NewPD()
	for trial := 0; trial < 20; trial++ {
		a := register(t, pd, make([]byte, 8), allAccess, BaseZero())
		b := register(t, pd, make([]byte, 8), allAccess, BaseZero())
		for _, st := range strategies {
			n := uint64(0)
			for {
				g := st.guess(a.STag(), lo, hi-lo+1, n)
				n++
				if g == a.STag() || n > uint64(hi-lo)*256 {
					t.Fatalf("%s: guess %d is %v (own %v)", st.name, n, g, a.STag())
				}
				if _, f := pd.Lookup(g, 0, 1, RemoteWrite); f == OK {
					require.Equal(t, b.STag(), g)
					break
				}
			}
			require.Equal(t, n, st.rank(a.STag(), b.STag(), lo, hi-lo+1), st.name)
		}
		require.NoError(t, a.Deregister())
		require.NoError(t, b.Deregister())
	}
}

// guessStats runs trials of "register the attacker's region, register the
// next one" and returns, per strategy, the mean number of guesses and its
// standard error. next registers the region after a (the real allocator, or
// a model of another one).
func guessStats(trials int, next func() (a, b STag)) (mean, se []float64) {
	span := uint32(MaxIndex - FirstIndex + 1)
	sum := make([]float64, len(strategies))
	sq := make([]float64, len(strategies))
	for range trials {
		a, b := next()
		for i, st := range strategies {
			r := float64(st.rank(a, b, FirstIndex, span))
			sum[i] += r
			sq[i] += r * r
		}
	}
	for i := range strategies {
		m := sum[i] / float64(trials)
		v := sq[i]/float64(trials) - m*m
		mean = append(mean, m)
		se = append(se, math.Sqrt(v/float64(trials)))
	}
	return mean, se
}

// Issue 11 item 5: at least 2^24 expected guesses for the region registered
// right after one the attacker holds. The figure is measured on the real
// allocator, with 1,000 other regions live in the table, for each guessing
// order above: the lower end of a 5-standard-error interval around the mean
// must clear 2^24. The same measurement on a model of the old allocator
// (random stride 1–16, random key) must fail, which shows the test can.
func TestGuess_NextRegistration(t *testing.T) {
	const trials = 20000
	tab := newTable(t, WithSeed(seed(31)))
	pd := tab.NewPD()
	for range 1000 {
		register(t, pd, make([]byte, 1), LocalRead, BaseZero())
	}
	buf := make([]byte, 8)
	mean, se := guessStats(trials, func() (STag, STag) {
		a := register(t, pd, buf, allAccess, BaseZero())
		b := register(t, pd, buf, allAccess, BaseZero())
		require.NoError(t, a.Deregister())
		require.NoError(t, b.Deregister())
		return a.STag(), b.STag()
	})
	for i, st := range strategies {
		t.Logf("%-36s %.4g guesses (2^%.2f) ± %.2g", st.name, mean[i], math.Log2(mean[i]), se[i])
		require.Greater(t, mean[i]-5*se[i], float64(1<<24), st.name)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	span := uint32(MaxIndex - FirstIndex + 1)
	mean, _ = guessStats(trials, func() (STag, STag) {
		a := MakeSTag(FirstIndex+rng.Uint32N(span), uint8(rng.Uint32()))
		i := FirstIndex + (a.Index()-FirstIndex+1+rng.Uint32N(16))%span
		return a, MakeSTag(i, uint8(rng.Uint32()))
	})
	t.Logf("old allocator, %s: %.4g guesses", strategies[0].name, mean[0])
	require.Less(t, mean[0], float64(1<<12))
}

// The index is uniform over the index space and the key uniform and
// independent of the attacker's key: chi-square tests (p < 10^-6 fails) of
// the index distance from the attacker's region in 256 bins, and of the key
// difference. Fixed seeds, so the outcome does not vary from run to run.
func TestGuess_NextIsUniform(t *testing.T) {
	const trials = 64 * 256
	tab := newTable(t, WithSeed(seed(41)))
	pd := tab.NewPD()
	span := uint32(MaxIndex - FirstIndex + 1)
	var dist, key [256]float64
	buf := make([]byte, 8)
	for range trials {
		a := register(t, pd, buf, allAccess, BaseZero())
		b := register(t, pd, buf, allAccess, BaseZero())
		d := (b.STag().Index() - a.STag().Index() + span) % span
		dist[uint64(d)*256/uint64(span)]++
		key[b.STag().Key()-a.STag().Key()]++
		require.NoError(t, a.Deregister())
		require.NoError(t, b.Deregister())
	}
	limit := chiSquareLimit(255, 4.75) // upper 10^-6 tail
	for name, bins := range map[string]*[256]float64{"index distance": &dist, "key difference": &key} {
		x := 0.0
		for _, n := range bins {
			e := float64(trials) / 256
			x += (n - e) * (n - e) / e
		}
		t.Logf("%s: chi-square %.1f (limit %.1f, 255 degrees of freedom)", name, x, limit)
		require.Less(t, x, limit, name)
	}
}

// chiSquareLimit is the Wilson–Hilferty approximation of the chi-square
// quantile with df degrees of freedom at z standard deviations.
func chiSquareLimit(df, z float64) float64 {
	h := 2 / (9 * df)
	return df * math.Pow(1-h+z*math.Sqrt(h), 3)
}

// With L other regions live in the attacker's PD, a guess hits one of them
// with probability about L/2^32, so the expected number of guesses until the
// first hit on any of them is about 2^32/(L+1) (docs/rfc-notes/stag.md).
// Measured here for L = 255 and 1023 with the "nearest index first" order:
// the rank of the first live region it reaches, each trial with a fresh set
// of regions.
func TestGuess_AnyRegionOfThePD(t *testing.T) {
	span := uint32(MaxIndex - FirstIndex + 1)
	st := strategies[1]
	buf := make([]byte, 1)
	for _, others := range []int{255, 1023} {
		tab := newTable(t, WithSeed(seed(51)))
		pd := tab.NewPD()
		const trials = 300
		sum, sq := 0.0, 0.0
		rs := make([]*Region, others)
		for range trials {
			a := register(t, pd, buf, allAccess, BaseZero())
			for i := range rs {
				rs[i] = register(t, pd, buf, allAccess, BaseZero())
			}
			first := uint64(math.MaxUint64)
			for _, r := range rs {
				first = min(first, st.rank(a.STag(), r.STag(), FirstIndex, span))
				require.NoError(t, r.Deregister())
			}
			require.NoError(t, a.Deregister())
			sum += float64(first)
			sq += float64(first) * float64(first)
		}
		m := sum / trials
		se := math.Sqrt((sq/trials - m*m) / trials)
		want := float64(span-1) * 256 / float64(others+1)
		t.Logf("%d other regions: %.4g guesses (2^%.2f) ± %.2g; 2^32/(L+1) = %.4g", others, m, math.Log2(m), se, want)
		require.InDelta(t, want, m, 5*se)
	}
}
