//go:build linux || darwin || freebsd

package pmemsink

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// attachT attaches a tracker that detaches when the test ends (before the
// sink closes).
func attachT(t *testing.T, s *Sink) *Tracker {
	tr, err := s.Attach(nil)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Detach() })
	return tr
}

func shadowSink(t *testing.T, size int64, mode Mode, opts ...Option) (*Sink, *recorder) {
	rec := &recorder{}
	s := openT(t, tpath(memDir(t), "f"), size, append(opts, WithShadow(rec, mode))...)
	return s, rec
}

func TestTracker_PersistAll(t *testing.T) {
	page := pageSize()
	s, rec := shadowSink(t, int64(16*page), ModeMsync)
	tr := attachT(t, s)
	require.True(t, tr.Clean())
	require.NoError(t, tr.PersistAll())
	require.Empty(t, rec.msyncs, "a clean tracker persists nothing")

	tr.Placed(10, 5)
	tr.Placed(page+1, 1) // the next page: one msync covers both
	tr.Placed(9*page, 1)
	require.False(t, tr.Clean())
	require.NoError(t, tr.PersistAll())
	require.Equal(t, [][2]uint64{{0, 2 * page}, {9 * page, page}}, rec.msyncs)
	require.True(t, tr.Clean())
	st := tr.Stats()
	require.Equal(t, uint64(3), st.Writes)
	require.Equal(t, uint64(7), st.BytesPlaced)
	require.Equal(t, uint64(1), st.Persists)
	require.Equal(t, 3*page, st.BytesPersisted)
	require.NoError(t, tr.Detach())
}

// A range flush persists only the dirty part of its range; GPSPM persists
// its whole range.
func TestTracker_PersistRangeAndSpan(t *testing.T) {
	page := pageSize()
	s, rec := shadowSink(t, int64(16*page), ModeMsync)
	tr := attachT(t, s)
	tr.Placed(100, 1)
	tr.Placed(8*page, 1)
	require.NoError(t, tr.PersistRange(8*page, 2*page))
	require.Equal(t, [][2]uint64{{8 * page, page}}, rec.msyncs)
	require.Equal(t, []Range{{0, page}}, tr.Dirty(nil), "the other range stays dirty")

	rec.reset()
	require.NoError(t, tr.PersistSpan(4*page, 3*page)) // nothing of ours there
	require.Equal(t, [][2]uint64{{4 * page, 3 * page}}, rec.msyncs)
	require.False(t, tr.Clean())

	rec.reset()
	require.NoError(t, tr.PersistSpan(50, 10)) // covers the dirty page
	require.Equal(t, [][2]uint64{{0, page}}, rec.msyncs)
	require.True(t, tr.Clean())

	require.ErrorIs(t, tr.PersistRange(15*page, 2*page), ErrRange)
	require.ErrorIs(t, tr.PersistSpan(0, 17*page), ErrRange)
}

// blocker is a Shadow whose msync waits until released.
type blocker struct {
	recorder
	entered chan struct{}
	release chan struct{}
}

func (b *blocker) Msync(start, length uint64) error {
	b.entered <- struct{}{}
	<-b.release
	return b.recorder.Msync(start, length)
}

// While a persist is under way the tracker is not clean, so a Read that
// arrives then waits for it even though the dirty set is empty.
func TestTracker_PersistInFlightIsNotClean(t *testing.T) {
	b := &blocker{entered: make(chan struct{}, 10), release: make(chan struct{})}
	s := openT(t, tpath(memDir(t), "f"), 1<<16, WithShadow(b, ModeMsync))
	tr := attachT(t, s)
	tr.Placed(0, 10)
	done := make(chan error)
	go func() { done <- tr.PersistAll() }()
	<-b.entered
	require.Empty(t, tr.Dirty(nil), "the ranges were taken")
	require.False(t, tr.Clean(), "but are not yet persistent")

	// A second persist waits for the first one: it returns only after it.
	second := make(chan error, 1)
	go func() { second <- tr.PersistAll() }()
	select {
	case err := <-second:
		t.Fatalf("the second persist returned (%v) while the first was under way", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(b.release)
	require.NoError(t, <-done)
	require.NoError(t, <-second)
	require.True(t, tr.Clean())
}

func TestTracker_PlacedClampsToRegion(t *testing.T) {
	s, _ := shadowSink(t, 4096, ModeDAX)
	tr := attachT(t, s)
	tr.Placed(4000, 1000)
	tr.Placed(5000, 10)
	require.Equal(t, []Range{{3968, 128}}, tr.Dirty(nil))
	require.NoError(t, tr.PersistAll())
}

// The data path allocates nothing: Placed per write, and the persists.
func TestTracker_DoesNotAllocate(t *testing.T) {
	for _, mode := range []Mode{ModeVolatile, ModeMsync} {
		s := openT(t, tpath(memDir(t), mode.String()), 1<<20, WithMode(mode))
		tr, err := s.Attach(nil)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(1, 1))
		n := testing.AllocsPerRun(200, func() {
			for i := 0; i < 100; i++ {
				tr.Placed(rng.Uint64N(1<<20), 1+rng.Uint64N(4096))
			}
			if err := tr.PersistRange(rng.Uint64N(1<<19), 1<<18); err != nil {
				panic(err)
			}
			if err := tr.PersistAll(); err != nil {
				panic(err)
			}
			_ = tr.Clean()
		})
		require.Zero(t, n, "mode %v", mode)
		require.NoError(t, tr.Detach())
	}
}

// Placement and persists on different goroutines, as the engine runs them.
func TestTracker_Concurrent(t *testing.T) {
	s, _ := shadowSink(t, 1<<20, ModeMsync)
	tr := attachT(t, s)
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Add(2)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(2, 2))
		for i := 0; i < 20000; i++ {
			tr.Placed(rng.Uint64N(1<<20), 1+rng.Uint64N(100))
		}
		stop.Store(true)
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := tr.PersistAll(); err != nil {
				panic(err)
			}
			_ = tr.Clean()
		}
	}()
	wg.Wait()
	require.NoError(t, tr.PersistAll())
	require.True(t, tr.Clean())
	require.Equal(t, uint64(20000), tr.Stats().Writes)
}

// An 8-byte write to an 8-aligned word is one store: a reader never sees
// half of it (and the race detector sees no plain store racing the
// reader's atomic load).
func TestPlace_EightBytesAtomically(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 4096)
	word := s.Bytes()[64:72]
	p := (*uint64)(unsafe.Pointer(&word[0]))
	a := []byte{1, 1, 1, 1, 1, 1, 1, 1}
	b := []byte{2, 2, 2, 2, 2, 2, 2, 2}
	const va, vb = 0x0101010101010101, 0x0202020202020202
	Place(word, a)
	var torn atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100000; i++ {
			if v := atomic.LoadUint64(p); v != va && v != vb {
				torn.Store(v)
			}
		}
	}()
	for i := 0; i < 100000; i++ {
		if i%2 == 0 {
			Place(word, b)
		} else {
			Place(word, a)
		}
	}
	<-done
	require.Zero(t, torn.Load())

	// Anything else is a plain copy.
	dst := s.Bytes()[101:120]
	Place(dst, []byte("0123456789"))
	require.Equal(t, "0123456789", string(dst[:10]))
	Place(s.Bytes()[3:], []byte("abcdefgh")) // 8 bytes, unaligned
	require.Equal(t, "abcdefgh", string(s.Bytes()[3:11]))
}
