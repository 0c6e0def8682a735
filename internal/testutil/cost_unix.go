//go:build unix

package testutil

import (
	"syscall"
	"testing"
	"time"
)

// Cost is the process's CPU time and context switches at a point of a
// benchmark. Reported per operation, they say what a run cost however busy
// the machine was, which ns/op on a shared machine does not: context
// switches count how often threads blocked and were woken (most of a round
// trip's latency), CPU time what a byte or a message costs both ends.
type Cost struct{ cpu, switches int64 }

// StartCost reads the process's cost so far.
func StartCost() Cost {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return Cost{}
	}
	return Cost{
		cpu:      ru.Utime.Nano() + ru.Stime.Nano(),
		switches: int64(ru.Nvcsw + ru.Nivcsw),
	}
}

// Report adds cpu-ns/op and ctxsw/op since c to b's results.
func (c Cost) Report(b *testing.B) {
	now := StartCost()
	n := float64(b.N)
	b.ReportMetric(float64(now.cpu-c.cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(now.switches-c.switches)/n, "ctxsw/op")
}

// CPUSince is the process's CPU time since c, and whether the platform
// reports it.
func (c Cost) CPUSince() (time.Duration, bool) {
	return time.Duration(StartCost().cpu - c.cpu), true
}
