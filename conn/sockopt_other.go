//go:build !linux && !darwin && !freebsd && !windows

package conn

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// setUserTimeout fails: this system has no per-socket option that bounds
// how long sent data may stay unacknowledged.
func setUserTimeout(uintptr, time.Duration) error {
	return fmt.Errorf("no per-socket TCP user timeout on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
