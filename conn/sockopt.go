package conn

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpMSS returns the connection's TCP maximum segment size, or 0 if it is
// not a TCP socket.
func tcpMSS(c net.Conn) int {
	sc, ok := rawConn(c).(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	mss := 0
	raw.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG); err == nil {
			mss = v
		}
	})
	return mss
}

// tuneSocket applies the TCP options of cfg. TCP_NODELAY is Go's default
// for TCP connections and stays on: the transmitter batches FPDUs itself.
func tuneSocket(c net.Conn, cfg *config) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	if cfg.keepAlive < 0 {
		if err := tc.SetKeepAlive(false); err != nil {
			return err
		}
	} else if cfg.keepAlive > 0 {
		if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: cfg.keepAlive, Interval: cfg.keepAlive, Count: 3}); err != nil {
			return err
		}
	}
	if cfg.userTimeout > 0 {
		raw, err := tc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(cfg.userTimeout/time.Millisecond))
		})
		if err != nil {
			return err
		}
		return serr
	}
	return nil
}
