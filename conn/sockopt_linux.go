package conn

import (
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT (milliseconds): how long sent data
// may stay unacknowledged before the kernel drops the connection.
func setUserTimeout(fd uintptr, d time.Duration) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ceilUnits(d, time.Millisecond))
}
