package pcaptap_test

import (
	"io"
	"net"
	"testing"

	"github.com/iwarp-go/iwarp-go/pcaptap"
)

// sinkConn is a TCP-addressed connection whose writes go nowhere, so the
// benchmark measures the recording alone.
type sinkConn struct{ net.Conn }

func (sinkConn) Write(p []byte) (int, error) { return len(p), nil }
func (sinkConn) Close() error                { return nil }
func (sinkConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (sinkConn) RemoteAddr() net.Addr        { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7174} }

// The cost of recording one Write: a frame built and written to the file.
func BenchmarkTap_Write(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"64B", 64}, {"4KiB", 4096}, {"64KiB", 65536}} {
		size := c.size
		b.Run(c.name, func(b *testing.B) {
			tap, err := pcaptap.New(io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			c := tap.Wrap(sinkConn{})
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			tap.Close()
		})
	}
}
