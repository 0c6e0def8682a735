//go:build unix

package conn

import (
	"syscall"
	"testing"
)

// cost is the process's CPU time and context switches at a point of a
// benchmark. Reported per operation, they say what a run cost however busy
// the machine was, which ns/op on a shared machine does not: context
// switches count how often threads blocked and were woken (most of a round
// trip's latency), CPU time what a byte or a message costs both ends.
type cost struct{ cpu, switches int64 }

func startCost() cost {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cost{}
	}
	return cost{
		cpu:      ru.Utime.Nano() + ru.Stime.Nano(),
		switches: int64(ru.Nvcsw + ru.Nivcsw),
	}
}

// report adds cpu-ns/op and ctxsw/op since c to b's results.
func (c cost) report(b *testing.B) {
	now := startCost()
	n := float64(b.N)
	b.ReportMetric(float64(now.cpu-c.cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(now.switches-c.switches)/n, "ctxsw/op")
}
