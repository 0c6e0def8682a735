package mpa

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWriter_TryFlush: a non-blocking flush sends what the socket takes,
// keeps the rest queued, and the stream the peer reads is exactly what
// Flush alone would have sent — also when the socket fills up and more
// FPDUs are queued behind a partial write.
func TestWriter_TryFlush(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan []byte, 1)
	release := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		<-release // let the sender's socket fill up first
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c.(*net.TCPConn).SetWriteBuffer(64 << 10)

	var want bytes.Buffer
	ref := NewWriter(&want, WriterConfig{CRC: true})
	w := NewWriter(c, WriterConfig{CRC: true})
	payload := make([]byte, 60000)
	partial := false
	for i := 0; i < 200; i++ {
		for j := range payload {
			payload[j] = byte(i + j)
		}
		p := append([]byte(nil), payload...) // queued by reference
		hdr := []byte{0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, byte(i)}
		require.NoError(t, ref.WriteFPDU(hdr, p))
		require.NoError(t, w.WriteFPDU(hdr, p))
		done, err := w.TryFlush()
		require.NoError(t, err)
		if !done {
			partial = true
			require.Positive(t, w.Buffered())
		}
	}
	require.True(t, partial, "the socket never filled up; the test did not exercise a partial write")
	close(release)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	require.NoError(t, w.Flush())
	require.Zero(t, w.Buffered())
	c.Close()
	require.NoError(t, ref.Flush())
	require.Equal(t, want.Bytes(), <-got)

	// A writer without a socket cannot try.
	var buf bytes.Buffer
	nw := NewWriter(&buf, WriterConfig{})
	require.NoError(t, nw.WriteFPDU([]byte{1, 2}))
	done, err := nw.TryFlush()
	require.NoError(t, err)
	require.False(t, done)
	require.NoError(t, nw.Flush())
	require.Equal(t, 8, buf.Len())
}
