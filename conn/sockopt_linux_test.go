package conn

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func sockopt(t *testing.T, c net.Conn, level, opt int) int {
	t.Helper()
	raw, err := rawConn(c).(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var v int
	var gerr error
	require.NoError(t, raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }))
	require.NoError(t, gerr)
	return v
}

// TestOptions_TCP: keep-alive and TCP_USER_TIMEOUT (which makes a peer that
// vanishes without FIN or RST fail the connection once sent data stays
// unacknowledged) reach the sockets on both sides; TCP_NODELAY stays on.
func TestOptions_TCP(t *testing.T) {
	checkLeaks(t)
	opts := []Option{WithTCPUserTimeout(1500 * time.Millisecond), WithTCPKeepAlive(7 * time.Second)}
	client, server := connectPair(t, pairConfig{clientOpts: opts, serverOpts: opts})
	for _, ep := range []*endpoint{client, server} {
		c := ep.qp.eng.c
		require.Equal(t, 1500, sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT))
		require.Equal(t, 1, sockopt(t, c, unix.SOL_SOCKET, unix.SO_KEEPALIVE))
		require.Equal(t, 7, sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE))
		require.Equal(t, 1, sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_NODELAY))
	}
}

// TestOptions_TCPUserTimeoutRounding: a user timeout that is not a whole
// number of milliseconds is rounded up, never down to 0 (which would mean
// the system default), and a huge one is capped rather than wrapped.
func TestOptions_TCPUserTimeoutRounding(t *testing.T) {
	checkLeaks(t)
	opts := []Option{WithTCPUserTimeout(1500 * time.Microsecond)}
	client, server := connectPair(t, pairConfig{clientOpts: opts, serverOpts: opts})
	for _, ep := range []*endpoint{client, server} {
		require.Equal(t, 2, sockopt(t, ep.qp.eng.c, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT))
	}
	require.Equal(t, 1, ceilUnits(time.Nanosecond, time.Second))
	require.Equal(t, 2, ceilUnits(1001*time.Millisecond, time.Second))
	require.Equal(t, 1, ceilUnits(time.Second, time.Second))
	require.Equal(t, 1<<31-1, ceilUnits(1<<62, time.Millisecond))
}
