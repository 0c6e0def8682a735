package bench

import "time"

// cpuMeter measures the CPU time (user and system, every thread) this
// process spends over an interval. Where the system does not say
// (processCPU's ok is false), it measures nothing.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// elapsed returns the CPU time since startCPU.
func (m cpuMeter) elapsed() (time.Duration, bool) {
	if !m.ok {
		return 0, false
	}
	t, ok := processCPU()
	if !ok {
		return 0, false
	}
	return t - m.start, true
}

// cpuClock is the CPU meter of a ping-pong's counted round trips: begin
// starts it at the first of them, perRoundTrip divides what it measured
// since by their number.
type cpuClock struct {
	m       cpuMeter
	started bool
}

// begin starts the meter if it is not running, and returns the time the
// round trip starts at: t, or now if reading the meter took time.
func (c *cpuClock) begin(t time.Time) time.Time {
	if c.started {
		return t
	}
	c.m, c.started = startCPU(), true
	return time.Now()
}

// perRoundTrip is the CPU time per round trip in microseconds, or nil
// if nothing was measured.
func (c *cpuClock) perRoundTrip(n int) *float64 {
	if !c.started {
		return nil
	}
	used, ok := c.m.elapsed()
	return perRoundTrip(used, ok, uint64(n))
}

// perRoundTrip is CPU time per round trip in microseconds, or nil.
func perRoundTrip(cpu time.Duration, ok bool, n uint64) *float64 {
	if !ok || n == 0 {
		return nil
	}
	return ptr(micros(cpu) / float64(n))
}
