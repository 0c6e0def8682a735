//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time of the whole process
// (getrusage RUSAGE_SELF: every thread, the kernel's work on its sockets
// included).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
