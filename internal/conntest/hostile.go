package conntest

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/mpa"
)

// RequestThenReset connects to the iWARP listener at addr over raw TCP,
// sends an MPA Request (revision 2, enhanced, CRC off, IRD = ORD = 1)
// carrying privateData, and resets the connection (an RST, not a FIN)
// without waiting for the Reply: a client that dies during setup.
func RequestThenReset(t testing.TB, addr string, privateData []byte) {
	t.Helper()
	f, err := mpa.BuildRequest(&mpa.Config{IRD: 1, ORD: 1}, privateData)
	require.NoError(t, err)
	b, err := mpa.AppendFrame(nil, &f)
	require.NoError(t, err)
	sendAndReset(t, addr, b)
}

// Garbage connects to addr over raw TCP, sends bytes that are not an MPA
// Request and resets the connection.
func Garbage(t testing.TB, addr string) {
	t.Helper()
	sendAndReset(t, addr, []byte("GET / HTTP/1.0\r\n\r\n"))
}

func sendAndReset(t testing.TB, addr string, b []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	_, err = c.Write(b)
	require.NoError(t, err)
	// Let the listener read the bytes before the reset discards them.
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, c.(*net.TCPConn).SetLinger(0))
	require.NoError(t, c.Close())
}
