package pmemsink

import "sync"

// Tracker is one connection's view of a sink: the ranges it placed that
// are not yet persistent (a bounded DirtySet), and the persists that make
// its flushes truthful. It also pins the mapping: Close asks the
// connection to stop (the stop function given to Attach) and waits for
// Detach.
//
// Placed is called by the goroutine that places the connection's RDMA
// Writes, after each placement; the Persist methods may run on any other
// goroutine (a persist never holds up placement), and calls to them are
// serialised: each starts after the previous one finished, so a persist
// that returns covers everything any earlier one took.
type Tracker struct {
	s    *Sink
	stop func()

	mu       sync.Mutex // guards dirty, inflight, stats
	dirty    DirtySet
	inflight int
	stats    TrackerStats

	pmu     sync.Mutex // serialises persists; guards scratch
	scratch []Range
}

// TrackerStats counts a tracker's work.
type TrackerStats struct {
	Writes, BytesPlaced      uint64
	Persists, BytesPersisted uint64
	// Widened counts the times the dirty set merged ranges at its cap.
	Widened uint64
}

// Attach returns a new tracker for one connection using the sink. stop,
// if not nil, is called once by Close to ask that connection to end (it
// must not block; the connection then calls Detach).
func (s *Sink) Attach(stop func()) (*Tracker, error) {
	t := &Tracker{s: s, stop: stop}
	t.dirty.init(s.cfg.trackerCap, s.gran)
	t.dirty.dropCap = s.cfg.hooks != nil && s.cfg.hooks.dropAtCap
	t.scratch = make([]Range, 0, t.dirty.Cap()+1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrClosed
	}
	s.trackers[t] = struct{}{}
	return t, nil
}

// Sink returns the tracker's sink.
func (t *Tracker) Sink() *Sink { return t.s }

// Placed records that [off, off+n) of the region was written by this
// connection. It does not allocate.
func (t *Tracker) Placed(off, n uint64) {
	size := uint64(t.s.info.Size)
	if off >= size || n == 0 {
		return
	}
	n = min(n, size-off)
	t.mu.Lock()
	t.dirty.Add(off, n)
	t.stats.Writes++
	t.stats.BytesPlaced += n
	t.mu.Unlock()
}

// Clean reports whether every byte placed so far is persistent: nothing
// is dirty and no persist is under way. A connection answers an RDMA Read
// on a clean tracker at once, with no persist.
func (t *Tracker) Clean() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirty.Empty() && t.inflight == 0
}

// PersistAll persists everything placed before the call: what an RDMA
// Read (read-after-write) and a whole-region Flush need. On success every
// byte this connection placed before the call is persistent; on error
// none of it counts as such and the ranges stay dirty.
func (t *Tracker) PersistAll() error {
	return t.run(func(d *DirtySet, dst []Range) []Range { return d.TakeAll(dst) }, nil)
}

// PersistRange persists the dirty parts of [off, off+n): a range Flush.
func (t *Tracker) PersistRange(off, n uint64) error {
	if err := t.s.checkRange(off, n); err != nil {
		return err
	}
	return t.run(func(d *DirtySet, dst []Range) []Range { return d.TakeRange(off, n, dst) }, nil)
}

// PersistSpan persists all of [off, off+n), whoever wrote it, and drops
// that range from this tracker's dirty set: a GPSPM flush request, whose
// server persists the range it names. The span itself is persisted as
// Sink.Persist would (the persist units it touches), and of the tracker's
// ranges taken with it only those reaching beyond those units in addition.
func (t *Tracker) PersistSpan(off, n uint64) error {
	if err := t.s.checkRange(off, n); err != nil {
		return err
	}
	g := t.s.gran
	lo, hi := alignDown(off, g), alignUp(off+n, g)
	return t.run(func(d *DirtySet, dst []Range) []Range {
		dst = d.TakeRange(off, n, dst)
		// Taken ranges inside the span's units are covered by the span.
		kept := dst[:0]
		for _, r := range dst {
			if r.Off < lo || r.End() > hi {
				kept = append(kept, r)
			}
		}
		return kept
	}, &Range{Off: off, Len: n})
}

func (t *Tracker) run(take func(*DirtySet, []Range) []Range, extra *Range) error {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	t.mu.Lock()
	rs := take(&t.dirty, t.scratch[:0])
	t.inflight++
	t.mu.Unlock()

	persist := rs
	if extra != nil {
		persist = append(rs, *extra)
	}
	var err error
	if len(persist) > 0 {
		err = t.s.PersistRanges(persist)
	} else {
		// Nothing of ours is dirty, but a failed sink must not answer a
		// flush as if it were fine.
		err = t.s.Err()
	}

	t.mu.Lock()
	t.inflight--
	if err != nil {
		// Nothing taken counts as persistent: put it back (a span whose
		// dirty parts were not kept apart goes back whole, which is more
		// than was dirty and therefore safe).
		for _, r := range persist {
			t.dirty.Add(r.Off, r.Len)
		}
	} else if len(persist) > 0 {
		t.stats.Persists++
		for _, r := range persist {
			t.stats.BytesPersisted += r.Len
		}
	}
	t.mu.Unlock()
	return err
}

// Dirty appends the tracker's dirty ranges to dst (for diagnostics).
func (t *Tracker) Dirty(dst []Range) []Range {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirty.Ranges(dst)
}

// Stats returns the tracker's counters.
func (t *Tracker) Stats() TrackerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stats
	st.Widened = t.dirty.Widened()
	return st
}

// Detach persists what is still dirty (an orderly end leaves nothing
// behind) and releases the sink. It is safe to call more than once, and
// after Close.
func (t *Tracker) Detach() error {
	var err error
	if !t.Clean() {
		err = t.PersistAll()
		if err == ErrClosed {
			err = nil // Close persists the whole region
		}
	}
	t.s.detach(t)
	return err
}
