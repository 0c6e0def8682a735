package conn

import (
	"bufio"
	"crypto/tls"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// tlsBenchPair is benchPair inside TLS, CRC off (TLS authenticates every
// byte).
func tlsBenchPair(b *testing.B) (client, server *endpoint) {
	ca := tlstest.NewCA(b, "bench CA")
	return connectPair(b, pairConfig{caps: QPCaps{SendDepth: 256, RecvDepth: 256},
		clientOpts: []Option{WithTLS(ca.Client(b, "")), WithCRC(CRCOff)},
		serverOpts: []Option{WithTLS(ca.Server(b, "server", nil)), WithCRC(CRCOff)}})
}

// BenchmarkTLS_PingPong is BenchmarkPingPong inside TLS; beside it,
// BenchmarkTLS_RawPingPong is the same 8-byte round trip over bare
// crypto/tls streams on loopback. Both show 2 allocations per round trip:
// crypto/tls's own (readFromUntil's reader, one per record read), none of
// this package's.
func BenchmarkTLS_PingPong(b *testing.B) {
	client, server := tlsBenchPair(b)
	pingPongOn(b, client, server, func(qp *QP, buf []SGE, _ RemoteAddr) error {
		return qp.PostSend(SendWR{Op: OpSend, SGL: buf})
	})
}

func BenchmarkTLS_RawPingPong(b *testing.B) {
	ca := tlstest.NewCA(b, "bench CA")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ca.Server(b, "server", nil))
	require.NoError(b, err)
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		r := bufio.NewReader(s)
		var m [8]byte
		for {
			if _, err := io.ReadFull(r, m[:]); err != nil {
				return
			}
			if _, err := s.Write(m[:]); err != nil {
				return
			}
		}
	}()
	ccfg := ca.Client(b, "")
	c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
	require.NoError(b, err)
	r := bufio.NewReader(c)
	var m [8]byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(m[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, m[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
	<-done
}

// BenchmarkTLS_Write1MiB is a stream of 1 MiB RDMA Writes inside TLS. Its
// allocations are crypto/tls's, one per record read (up to 64 per MiB),
// none of this package's.
func BenchmarkTLS_Write1MiB(b *testing.B) {
	const size = 1 << 20
	client, server := tlsBenchPair(b)
	target := server.register(b, size, LocalWrite|RemoteWrite)
	src := client.register(b, size, 0)
	sgl := []SGE{src.SGE(0, size)}
	remote := target.Remote(0)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	drive(b, client, func(int) SendWR {
		return SendWR{Op: OpWrite, SGL: sgl, Remote: remote}
	})
}

// BenchmarkTLS_Send64 is a stream of 64-byte Sends inside TLS: it shows
// that posts in quick succession are still batched into one record and
// one write by the transmitter, not sealed and written one by one.
func BenchmarkTLS_Send64(b *testing.B) {
	client, server := tlsBenchPair(b)
	sendStreamOn(b, client, server, 64)
}
