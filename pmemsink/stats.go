package pmemsink

import (
	"sync/atomic"
	"time"
)

// Stats counts a sink's persists since Open, over every connection and
// direct call (Persist, PersistRanges, the trackers' flushes, Close).
type Stats struct {
	// Persists counts persist passes: one fence (DAX) or one series of
	// msyncs over the ranges one flush asked for. In volatile mode they
	// run and make nothing durable.
	Persists uint64
	// BytesPersisted sums the lengths of the ranges asked for, before
	// rounding to cache lines or pages.
	BytesPersisted uint64
	// Errors counts the persists that failed (the sink is failed after
	// the first).
	Errors uint64
	// PersistTime is the time spent persisting, in all: with Persists,
	// the mean latency of a persist.
	PersistTime time.Duration
}

// sinkCounters are Stats as the persists record them: atomics, so that
// reading them takes no lock a persist holds.
type sinkCounters struct {
	persists, bytes, errors, nanos atomic.Uint64
}

func (c *sinkCounters) record(rs []Range, took time.Duration, err error) {
	if err != nil {
		c.errors.Add(1)
		return
	}
	var n uint64
	for _, r := range rs {
		n += r.Len
	}
	c.persists.Add(1)
	c.bytes.Add(n)
	c.nanos.Add(uint64(max(took, 0)))
}

// Stats returns the sink's persist counters.
func (s *Sink) Stats() Stats {
	c := &s.counters
	return Stats{Persists: c.persists.Load(), BytesPersisted: c.bytes.Load(), Errors: c.errors.Load(),
		PersistTime: time.Duration(c.nanos.Load())}
}
