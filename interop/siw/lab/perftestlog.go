package lab

import (
	"slices"
	"strings"
)

// perftestNotices are the lines perftest (Debian 12's 4.5+0.17, perftest
// 6.06) prints on stderr in runs that go right: on siw it says this at the
// start of every RDMA Read test, before it connects.
var perftestNotices = []string{
	"Device not recognized to implement inline feature. Disabling it",
}

// PerftestQuiet reports whether perftest's stderr holds nothing but the
// notices it prints in runs that go right (and blank lines): whether it
// reported no failure of its own.
func PerftestQuiet(stderr string) bool {
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if line != "" && !slices.Contains(perftestNotices, line) {
			return false
		}
	}
	return true
}
