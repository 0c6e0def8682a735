//go:build linux || darwin || freebsd

package pmemsink

import (
	"errors"
	"math"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a Shadow that records what the sink asked of it.
type recorder struct {
	mu         sync.Mutex
	msyncs     [][2]uint64
	writeBacks []uint64
	fences     int
	fail       error
}

func (r *recorder) Msync(start, length uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msyncs = append(r.msyncs, [2]uint64{start, length})
	if r.fail != nil {
		err := r.fail
		r.fail = nil
		return err
	}
	return nil
}

func (r *recorder) WriteBack(off uint64) {
	r.mu.Lock()
	r.writeBacks = append(r.writeBacks, off)
	r.mu.Unlock()
}

func (r *recorder) Fence() {
	r.mu.Lock()
	r.fences++
	r.mu.Unlock()
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.msyncs, r.writeBacks, r.fences = nil, nil, 0
	r.mu.Unlock()
}

// msync gets page-aligned bounds covering the range, for every offset
// around a page and length that matter (research/persistence.md §7.2).
func TestPersist_MsyncIsPageAligned(t *testing.T) {
	page := pageSize()
	rec := &recorder{}
	size := int64(8 * page)
	s := openT(t, tpath(memDir(t), "f"), size, WithShadow(rec, ModeMsync))
	disk := openT(t, tpath(diskDir(t), "f"), size, WithMode(ModeMsync))
	for _, mod := range []uint64{0, 1, 63, 64, page - 1} {
		for _, n := range []uint64{0, 1, page, 2*page + 1} {
			off := 2*page + mod
			rec.reset()
			require.NoError(t, s.Persist(off, n))
			require.NoError(t, disk.Persist(off, n), "real msync at %d+%d", off, n)
			if n == 0 {
				require.Empty(t, rec.msyncs)
				continue
			}
			require.Len(t, rec.msyncs, 1)
			start, length := rec.msyncs[0][0], rec.msyncs[0][1]
			require.Zero(t, start%page, "start page-aligned")
			require.Zero(t, length%page, "whole pages")
			require.LessOrEqual(t, start, off)
			require.Greater(t, start+page, off, "no page before the range")
			require.GreaterOrEqual(t, start+length, off+n, "covers the last byte")
			require.Less(t, start+length, off+n+page, "no page after the range")
		}
	}
	// The region's last page, when the size is not a page multiple.
	odd := openT(t, tpath(memDir(t), "odd"), int64(page+100), WithShadow(rec, ModeMsync))
	rec.reset()
	require.NoError(t, odd.Persist(page+99, 1))
	require.Equal(t, [][2]uint64{{page, page}}, rec.msyncs)
}

// DAX: every cache line of the range is written back, then one fence.
func TestPersist_DAXLines(t *testing.T) {
	rec := &recorder{}
	s := openT(t, tpath(memDir(t), "f"), 1<<16, WithShadow(rec, ModeDAX))
	require.Equal(t, uint64(64), s.Granularity())
	require.NoError(t, s.Persist(100, 100)) // lines 64, 128, 192
	require.Equal(t, []uint64{64, 128, 192}, rec.writeBacks)
	require.Equal(t, 1, rec.fences)
	rec.reset()
	require.NoError(t, s.PersistRanges([]Range{{0, 1}, {1000, 64}, {5000, 0}}))
	require.Equal(t, []uint64{0, 960, 1024}, rec.writeBacks)
	require.Equal(t, 1, rec.fences, "one fence for all ranges")
}

// The DAX persist loops run with each instruction this CPU has (on a file
// that is not DAX: the instructions are harmless there).
func TestPersist_DAXInstructions(t *testing.T) {
	fls := cpuFlushers()
	if len(fls) == 0 {
		t.Skip("no cache-line write-back instruction")
	}
	for _, fl := range fls {
		t.Run(fl.name, func(t *testing.T) {
			s := openT(t, tpath(diskDir(t), "f"), 1<<20, withTestFlush(fl.name))
			require.Equal(t, fl.name, s.Info().Flush)
			b := s.Bytes()
			for i := range b {
				b[i] = byte(i * 7)
			}
			require.NoError(t, s.Persist(0, 1<<20))
			require.NoError(t, s.Persist(12345, 1))
			require.NoError(t, s.PersistRanges([]Range{{1, 200}, {70000, 9000}}))
			for i := range b {
				if b[i] != byte(i*7) {
					t.Fatalf("byte %d changed", i)
				}
			}
		})
	}
}

// Adjacent pages share one msync; far ones get their own.
func TestPersistRanges_MergesPages(t *testing.T) {
	page := pageSize()
	rec := &recorder{}
	s := openT(t, tpath(memDir(t), "f"), int64(16*page), WithShadow(rec, ModeMsync))
	require.NoError(t, s.PersistRanges([]Range{{10, 5}, {page + 1, 1}, {page + 2, 100}, {10 * page, 1}}))
	require.Equal(t, [][2]uint64{{0, 2 * page}, {10 * page, page}}, rec.msyncs)
}

func TestPersist_Range(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 4096)
	require.NoError(t, s.Persist(0, 4096))
	require.NoError(t, s.Persist(4096, 0))
	for _, r := range [][2]uint64{{4096, 1}, {0, 4097}, {1, math.MaxUint64}, {math.MaxUint64, 2}} {
		require.ErrorIs(t, s.Persist(r[0], r[1]), ErrRange, "%v", r)
	}
	require.ErrorIs(t, s.PersistRanges([]Range{{0, 1}, {5000, 1}}), ErrRange)
}

// A failed persist is reported, and every later one fails too: the kernel
// reports a write-back error once, so a later success proves nothing.
func TestPersist_FailureIsSticky(t *testing.T) {
	rec := &recorder{fail: syscall.EIO}
	s := openT(t, tpath(memDir(t), "f"), 1<<16, WithShadow(rec, ModeMsync))
	err := s.Persist(100, 10)
	require.ErrorIs(t, err, syscall.EIO)
	var pe *PersistError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, uint64(100), pe.Off)
	require.Contains(t, err.Error(), "every later persist of this sink fails")

	require.ErrorIs(t, s.Persist(30000, 1), syscall.EIO, "later persists fail")
	require.Len(t, rec.msyncs, 1, "without asking the kernel again")
	require.ErrorIs(t, s.Err(), syscall.EIO)

	tr, err := s.Attach(nil)
	require.NoError(t, err)
	require.ErrorIs(t, tr.PersistAll(), syscall.EIO, "even with nothing dirty, a flush fails")
	tr.Placed(0, 10)
	require.ErrorIs(t, tr.PersistAll(), syscall.EIO)
	require.False(t, tr.Clean(), "the ranges stay dirty")
	require.ErrorIs(t, tr.Detach(), syscall.EIO)
	require.ErrorIs(t, s.Close(), syscall.EIO)
}

func TestClose(t *testing.T) {
	rec := &recorder{}
	s, err := Open(tpath(memDir(t), "f"), 1<<16, WithShadow(rec, ModeMsync))
	require.NoError(t, err)
	stopped := make(chan struct{})
	tr, err := s.Attach(func() { close(stopped) })
	require.NoError(t, err)
	go func() {
		<-stopped
		tr.Placed(0, 1)
		_ = tr.Detach() // persists, or finds the sink closing
	}()
	require.NoError(t, s.Close())
	require.Equal(t, [2]uint64{0, 1 << 16}, rec.msyncs[len(rec.msyncs)-1], "Close persists the whole region")
	require.ErrorIs(t, s.Close(), ErrClosed)
	require.ErrorIs(t, s.Persist(0, 1), ErrClosed)
	_, err = s.Attach(nil)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, tr.Detach(), "detaching twice is harmless")
}

// Stats counts persist passes and the bytes they were asked for; a range
// refused before any persist counts nothing, a failed persist an error.
func TestStats_CountsPersists(t *testing.T) {
	page := pageSize()
	rec := &recorder{}
	s := openT(t, tpath(memDir(t), "f"), int64(16*page), WithShadow(rec, ModeMsync))
	require.Equal(t, Stats{}, s.Stats())
	require.NoError(t, s.PersistRanges([]Range{{10, 5}, {page + 1, 1}, {page + 2, 100}, {10 * page, 1}}))
	require.NoError(t, s.Persist(0, 4096))
	require.ErrorIs(t, s.Persist(16*page, 1), ErrRange)
	st := s.Stats()
	require.Equal(t, uint64(2), st.Persists)
	require.Equal(t, uint64(5+1+100+1+4096), st.BytesPersisted)
	require.Zero(t, st.Errors)
	require.Positive(t, st.PersistTime, "two msync passes took some time")

	rec.fail = syscall.EIO
	require.Error(t, s.Persist(0, 1))
	require.Error(t, s.Persist(0, 1))
	st = s.Stats()
	require.Equal(t, uint64(2), st.Persists, "failed persists are not persists")
	require.Equal(t, uint64(2), st.Errors)
}
