package conn

import (
	"fmt"
	"math"
	"net"
	"syscall"
	"time"
)

// The socket options that need more than package net live in one file per
// system: sockopt_unix.go and sockopt_windows.go read the MSS;
// sockopt_linux.go, sockopt_darwin.go, sockopt_freebsd.go and
// sockopt_windows.go set the TCP user timeout with the option each system
// has for it, and sockopt_other.go refuses it elsewhere.

// tcpMSS returns the connection's TCP maximum segment size, or 0 if it is
// not a TCP socket or the system does not say.
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
	raw.Control(func(fd uintptr) { mss = tcpMaxSeg(fd) })
	return mss
}

// tuneSocket applies the TCP options of cfg, to the TCP connection beneath
// a TLS stream too. TCP_NODELAY is Go's default for TCP connections and
// stays on: the transmitter batches FPDUs itself.
func tuneSocket(c net.Conn, cfg *config) error {
	tc, ok := rawConn(c).(*net.TCPConn)
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
		if err := raw.Control(func(fd uintptr) { serr = setUserTimeout(fd, cfg.userTimeout) }); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("iwarp: setting the TCP user timeout: %w", serr)
		}
	}
	return nil
}

// ceilUnits converts d to whole units, rounding up so that a positive
// timeout never becomes 0 (the system default), and capping it at what a
// C int option holds.
func ceilUnits(d, unit time.Duration) int {
	n := (d + unit - 1) / unit
	return int(min(n, math.MaxInt32))
}
