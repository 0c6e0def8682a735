package conn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// FuzzServerTLS feeds a TLS responder arbitrary bytes where a ClientHello
// (or, for a plain initiator, an MPA Request) belongs, then closes: setup
// always fails, within the setup timeout, with ErrTLSHandshake,
// ErrTLSRequired or an MPA error, and never panics.
func FuzzServerTLS(f *testing.F) {
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte(mpa.RequestKey + "\x40\x02\x00\x00"))
	f.Add([]byte("M"))
	f.Add([]byte{})
	f.Add([]byte{0x17, 0x03, 0x03, 0x40, 0x00, 0xff})
	ca := tlstest.NewCA(f, "fuzz CA")
	scfg := ca.Server(f, "server", nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.SetWriteDeadline(time.Now().Add(time.Second))
			b.Write(in)
			// Read whatever the responder answers (an alert, a reject)
			// so that its writes do not wait on the pipe, then close.
			b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			var sink [512]byte
			for {
				if _, err := b.Read(sink[:]); err != nil {
					break
				}
			}
			b.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cr, err := Server(ctx, a, WithTLS(scfg), WithSetupTimeout(time.Second))
		if err == nil {
			t.Fatalf("setup succeeded on %x: %v", in, cr.Request())
		}
		var me *mpa.Error
		if !errors.Is(err, ErrTLSHandshake) && !errors.Is(err, ErrTLSRequired) && !errors.As(err, &me) {
			t.Fatalf("unexpected error for %x: %v", in, err)
		}
	})
}
