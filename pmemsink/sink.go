package pmemsink

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// flusher is a cache-line write-back instruction and its fence.
type flusher struct {
	name  string
	lines func(p, n, line uintptr) // p line-aligned, n a multiple of line
	fence func()
	line  uintptr
}

type persistKind uint8

const (
	persistNone persistKind = iota
	persistMsync
	persistLines
	persistShadowMsync
	persistShadowLines
)

// Sink is a file mapped shared into memory: region byte N is file byte N,
// for N in [0, Size). The sink writes nothing into the file of its own; the
// file's contents are served as they are.
//
// Its methods are safe for concurrent use. Memory returned by Bytes may be
// touched only while the sink is open; touch it under Contain or Guard so
// that a fault (a truncated file, a media error) becomes an error instead
// of a crash.
type Sink struct {
	info   Info
	cfg    config
	fd     int
	mapped []byte // the whole mapping, a multiple of the page size
	mem    []byte // the region, mapped[:Size]
	kind   persistKind
	fl     flusher
	page   uint64
	gran   uint64
	// populateWrite: DAX, where prefault asks the system to fault the
	// mapping in writable (a read would map the zero page).
	populateWrite bool
	failed        atomic.Pointer[PersistError]
	counters      sinkCounters
	// persistSlots bounds the persists registrations run at once.
	persistSlots chan struct{}

	mu         sync.Mutex
	changed    *sync.Cond
	closing    bool
	timedOut   bool
	persisting int
	trackers   map[*Tracker]struct{}
	reserved   bool // mapping replaced by an inaccessible reservation
}

// Open creates or opens the file at path, allocates its first size bytes,
// maps them shared and detects the persistence mode (see Mode and
// WithMode). size 0 means the file's current size (or a device's size).
// Allocation failure (ENOSPC) fails Open, so that no page fault can fail
// for lack of space later; a file Open created is removed again when Open
// fails.
//
// Open returns ErrUnsupported on Windows.
func Open(path string, size int64, opts ...Option) (*Sink, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if size < 0 {
		return nil, fmt.Errorf("pmemsink: open %s: negative size %d", path, size)
	}
	if cfg.mode > ModeVolatile {
		return nil, fmt.Errorf("pmemsink: open %s: unknown mode %v", path, cfg.mode)
	}
	if cfg.shadow != nil && cfg.shadowMode != ModeMsync && cfg.shadowMode != ModeDAX {
		return nil, fmt.Errorf("pmemsink: open %s: a shadow emulates msync or dax, not %v", path, cfg.shadowMode)
	}
	s, err := openSink(path, size, &cfg)
	if err != nil {
		return nil, err
	}
	s.cfg = cfg
	s.persistSlots = make(chan struct{}, cfg.persistConc)
	s.changed = sync.NewCond(&s.mu)
	s.trackers = make(map[*Tracker]struct{})
	register(s)
	s.info.Prefaulted = s.prefault(cfg.prefault)
	return s, nil
}

// Info describes the sink.
func (s *Sink) Info() Info { return s.info }

// Size returns the region's length.
func (s *Sink) Size() int64 { return s.info.Size }

// Durable reports whether a successful Persist survives power loss (see
// Info.Durable).
func (s *Sink) Durable() bool { return s.info.Durable }

// Granularity returns the unit Persist rounds ranges out to.
func (s *Sink) Granularity() uint64 { return s.gran }

// Bytes returns the region: the mapping's first Size bytes. Writes into it
// are visible to every reader of the file at once and become persistent
// with Persist. It must not be used after Close.
func (s *Sink) Bytes() []byte { return s.mem }

// Err returns the persist error that failed the sink, or nil.
func (s *Sink) Err() error {
	if e := s.failed.Load(); e != nil {
		return e
	}
	return nil
}

func (s *Sink) checkRange(off, n uint64) error {
	if size := uint64(s.info.Size); n > size || off > size-n {
		return fmt.Errorf("%w: [%d, +%d) of a %d-byte region", ErrRange, off, n, size)
	}
	return nil
}

// Persist makes [off, off+n) persistent in the sink's mode: whole cache
// lines (DAX) or pages (msync) around it. It returns only once the
// guarantee holds, or with an error; after an error every later Persist
// fails too (see PersistError). n = 0 persists nothing.
func (s *Sink) Persist(off, n uint64) error {
	if err := s.checkRange(off, n); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.persist(Range{Off: off, Len: n})
}

// PersistRanges persists every range of rs, as Persist does for each, with
// one fence in DAX mode and one msync per run of adjacent pages. All
// ranges are checked before any is persisted.
func (s *Sink) PersistRanges(rs []Range) error {
	for _, r := range rs {
		if err := s.checkRange(r.Off, r.Len); err != nil {
			return err
		}
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.persist(rs...)
}

func (s *Sink) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrClosed
	}
	s.persisting++
	return nil
}

func (s *Sink) leave() {
	s.mu.Lock()
	s.persisting--
	if s.persisting == 0 {
		s.changed.Broadcast()
	}
	s.mu.Unlock()
}

// persist does the work for checked ranges, and counts it.
func (s *Sink) persist(rs ...Range) error {
	start := time.Now()
	err := s.persistRanges(rs)
	s.counters.record(rs, time.Since(start), err)
	return err
}

func (s *Sink) persistRanges(rs []Range) error {
	if e := s.failed.Load(); e != nil {
		return e
	}
	switch s.kind {
	case persistNone:
		return nil
	case persistLines:
		return s.persistLines(rs)
	case persistShadowLines:
		for _, r := range rs {
			a, b := s.lineSpan(r)
			for off := a; off < b; off += s.gran {
				s.cfg.shadow.WriteBack(off)
			}
		}
		s.cfg.shadow.Fence()
		return nil
	}
	return s.persistMsync(rs)
}

// lineSpan is the cache lines holding r (empty for an empty r).
func (s *Sink) lineSpan(r Range) (uint64, uint64) {
	if r.Len == 0 {
		return 0, 0
	}
	return span(r.Off, r.End(), s.gran, uint64(len(s.mapped)))
}

// persistLines writes back every line of every range, then fences once.
// The loop touches the mapping, so it runs under the sink's fault guard: a
// line of a truncated file or a poisoned page fails the persist instead
// of the process.
func (s *Sink) persistLines(rs []Range) error {
	err := s.guard(func() error {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(s.mapped)))
		for _, r := range rs {
			if a, b := s.lineSpan(r); b > a {
				s.fl.lines(base+uintptr(a), uintptr(b-a), s.fl.line)
			}
		}
		s.fl.fence()
		return nil
	})
	if err != nil {
		return s.fail(rs[0], err)
	}
	return nil
}

// persistMsync issues one msync per run of adjacent pages.
func (s *Sink) persistMsync(rs []Range) error {
	var runStart, runEnd uint64
	var first Range
	have := false
	for _, r := range rs {
		if r.Len == 0 {
			continue
		}
		a, b := s.msyncBounds(r)
		if have && a <= runEnd {
			runEnd = max(runEnd, b)
			continue
		}
		if have {
			if err := s.msyncSpan(runStart, runEnd); err != nil {
				return s.fail(first, err)
			}
		}
		runStart, runEnd, first, have = a, b, r, true
	}
	if have {
		if err := s.msyncSpan(runStart, runEnd); err != nil {
			return s.fail(first, err)
		}
	}
	return nil
}

// msyncBounds is the page span msync must cover for r: from the page
// holding its first byte to the end of the page holding its last.
func (s *Sink) msyncBounds(r Range) (uint64, uint64) {
	if h := s.cfg.hooks; h != nil && h.misalignMsync {
		// The defect the crash simulator must catch: an aligned start but
		// the unrounded length, which misses the tail of the range.
		a := alignDown(r.Off, s.page)
		return a, min(a+r.Len, uint64(len(s.mapped)))
	}
	return span(r.Off, r.End(), s.page, uint64(len(s.mapped)))
}

func (s *Sink) msyncSpan(a, b uint64) error {
	if s.kind == persistShadowMsync {
		return s.cfg.shadow.Msync(a, b-a)
	}
	return sysMsync(s.mapped[a:b])
}

// fail records the first persist failure and returns it.
func (s *Sink) fail(r Range, err error) error {
	s.failed.CompareAndSwap(nil, &PersistError{Path: s.info.Path, Off: r.Off, Len: r.Len, Err: err})
	return s.failed.Load()
}

// Close asks every attached Tracker's connection to stop, waits for them to
// detach (at most the close timeout, WithCloseTimeout) and for persists in
// progress, persists the whole region, and unmaps it. Should a tracker
// still be attached at the deadline, its memory is replaced by an
// inaccessible reservation instead of being unmapped, so that its late
// accesses fault inside a known range (and Contain turns them into errors)
// rather than land on whatever the address is reused for; the reservation
// goes when the last tracker detaches. Close returns the final persist's
// error, or the sink's earlier persist failure, joined with a timeout
// error if trackers did not detach.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closing = true
	var stops []func()
	for t := range s.trackers {
		if t.stop != nil {
			stops = append(stops, t.stop)
		}
	}
	s.mu.Unlock()
	for _, stop := range stops {
		stop()
	}

	timer := time.AfterFunc(s.cfg.closeTimeout, func() {
		s.mu.Lock()
		s.timedOut = true
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	s.mu.Lock()
	for len(s.trackers) > 0 && !s.timedOut {
		s.changed.Wait()
	}
	timer.Stop()
	// Persists are bounded system calls or flush loops: wait for them.
	for s.persisting > 0 {
		s.changed.Wait()
	}
	stuck := len(s.trackers)
	s.mu.Unlock()

	err := s.persistAll()
	var errStuck error
	s.mu.Lock()
	if stuck > 0 && len(s.trackers) > 0 {
		errStuck = fmt.Errorf("pmemsink: close %s: %d trackers still attached after %v; their accesses now fault", s.info.Path, len(s.trackers), s.cfg.closeTimeout)
		if rerr := sysReserve(s.mapped); rerr != nil {
			errStuck = errors.Join(errStuck, rerr)
		}
		s.reserved = true
		s.mu.Unlock()
	} else {
		s.mu.Unlock()
		err = errors.Join(err, s.unmap())
	}
	return errors.Join(err, errStuck, sysCloseFD(s.fd))
}

// persistAll is Close's final persist of the whole region.
func (s *Sink) persistAll() error {
	if e := s.failed.Load(); e != nil {
		return e
	}
	whole := Range{Off: 0, Len: uint64(s.info.Size)}
	if s.kind == persistLines && s.info.Backing == "fsdax" {
		// The kernel tracks dirty DAX pages; fsync writes back their lines.
		if err := sysMsync(s.mapped); err != nil {
			return s.fail(whole, err)
		}
		return nil
	}
	return s.persist(whole)
}

func (s *Sink) unmap() error {
	unregister(s)
	return sysMunmap(s.mapped)
}

// detach removes t; the last one out of a reserved mapping unmaps it.
func (s *Sink) detach(t *Tracker) {
	s.mu.Lock()
	_, ok := s.trackers[t]
	delete(s.trackers, t)
	last := ok && len(s.trackers) == 0
	if last {
		s.changed.Broadcast()
	}
	reserved := last && s.reserved
	if reserved {
		s.reserved = false
	}
	s.mu.Unlock()
	if reserved {
		_ = s.unmap()
	}
}

// String describes the sink (its Info).
func (s *Sink) String() string { return s.info.String() }

func pageSize() uint64 { return uint64(os.Getpagesize()) }
