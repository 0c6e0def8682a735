package conntest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
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

// RawPeer is an MPA initiator over raw TCP: it completes connection setup
// and then writes whatever FPDUs a test wants, reading nothing unless the
// test does.
type RawPeer struct {
	C   net.Conn
	Res *mpa.Result
	w   *mpa.Writer
}

// DialRaw connects to the iWARP listener at addr and runs MPA setup
// (revision 2, enhanced, CRC off, IRD = ORD = 1, no peer-to-peer) with
// privateData. The connection is closed when the test ends.
func DialRaw(t testing.TB, addr string, privateData []byte) *RawPeer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := mpa.Connect(ctx, c, &mpa.Config{IRD: 1, ORD: 1}, privateData)
	require.NoError(t, err)
	return &RawPeer{C: c, Res: res, w: mpa.NewWriter(c, mpa.WriterConfig{CRC: res.CRC, Markers: res.SendMarkers})}
}

// Sends writes n Sends of payload, one FPDU each, with MSNs from first.
func (p *RawPeer) Sends(t testing.TB, first uint32, n int, payload []byte) {
	t.Helper()
	for i := range n {
		hdr := ddp.AppendUntagged(nil, ddp.MakeControl(false, true), rdmap.MakeControl(rdmap.OpSend), 0, rdmap.QNSend, first+uint32(i), 0)
		require.NoError(t, p.w.WriteFPDU(hdr, payload))
	}
	require.NoError(t, p.C.SetWriteDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, p.w.Flush())
}
