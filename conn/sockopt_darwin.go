package conn

import (
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_RXT_CONNDROPTIME (whole seconds): how long the
// kernel keeps retransmitting unacknowledged data before it drops the
// connection, counted from the first retransmission.
func setUserTimeout(fd uintptr, d time.Duration) error {
	return unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RXT_CONNDROPTIME, ceilUnits(d, time.Second))
}
