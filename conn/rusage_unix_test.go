//go:build unix

package conn

import (
	"syscall"
	"testing"
)

// reportSwitches reports the process's context switches per operation
// since start (from startSwitches): how often threads blocked and were
// woken, which is what a round trip's latency is mostly made of and which,
// unlike ns/op, a busy machine does not distort.
func reportSwitches(b *testing.B, start int64) {
	b.ReportMetric(float64(switches()-start)/float64(b.N), "ctxsw/op")
}

func switches() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Nvcsw + ru.Nivcsw)
}
