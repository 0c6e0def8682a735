//go:build unix

package conn

import "golang.org/x/sys/unix"

func tcpMaxSeg(fd uintptr) int {
	v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG)
	if err != nil {
		return 0
	}
	return v
}
