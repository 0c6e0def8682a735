package conn

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// tcpMaxUnackTime is TCP_MAXUNACKTIME from <netinet/tcp.h>, added in
// FreeBSD 14 and not (yet) in x/sys/unix.
const tcpMaxUnackTime = 0x44

// setUserTimeout sets TCP_MAXUNACKTIME (whole seconds): the connection is
// reset when no sent byte has been acknowledged for that long. FreeBSD 13
// and older have no such option.
func setUserTimeout(fd uintptr, d time.Duration) error {
	err := unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, tcpMaxUnackTime, ceilUnits(d, time.Second))
	if errors.Is(err, unix.ENOPROTOOPT) {
		return fmt.Errorf("TCP_MAXUNACKTIME needs FreeBSD 14 or later: %w (%w)", errors.ErrUnsupported, err)
	}
	return err
}
