//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package bench

import "time"

// processCPU: not measured on this system.
func processCPU() (time.Duration, bool) { return 0, false }
