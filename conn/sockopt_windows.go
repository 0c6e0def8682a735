package conn

import (
	"time"

	"golang.org/x/sys/windows"
)

func tcpMaxSeg(fd uintptr) int {
	v, err := windows.GetsockoptInt(windows.Handle(fd), windows.IPPROTO_TCP, windows.TCP_MAXSEG)
	if err != nil {
		return 0
	}
	return v
}

// setUserTimeout sets TCP_MAXRTMS (milliseconds; Windows 10 1703 and
// later) or, where that is missing, TCP_MAXRT (whole seconds): how long
// TCP retransmits unacknowledged data before it aborts the connection.
func setUserTimeout(fd uintptr, d time.Duration) error {
	h := windows.Handle(fd)
	if err := windows.SetsockoptInt(h, windows.IPPROTO_TCP, windows.TCP_MAXRTMS, ceilUnits(d, time.Millisecond)); err == nil {
		return nil
	}
	return windows.SetsockoptInt(h, windows.IPPROTO_TCP, windows.TCP_MAXRT, ceilUnits(d, time.Second))
}
