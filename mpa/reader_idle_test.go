package mpa

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ReleaseIdle: between bursts the Reader holds no buffer, and what it
// reads is exactly what a Reader with its own buffer reads.
func TestReader_ReleaseIdle(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the idle wait needs the socket fast path")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s := <-accepted
	defer s.Close()

	r := NewReader(s, ReaderConfig{CRC: true, ReleaseIdle: true, BufferSize: 4096})
	require.Nil(t, r.buf, "no buffer before the first byte")
	w := NewWriter(c, WriterConfig{CRC: true})
	payloads := [][]byte{[]byte("first"), bytes.Repeat([]byte{7}, 10000), []byte("third")}
	got := make(chan []byte, 3)
	go func() {
		for range payloads {
			u, err := r.ReadFPDU(make([]byte, 1<<16))
			if err != nil {
				close(got)
				return
			}
			got <- append([]byte(nil), u...)
		}
	}()
	for _, p := range payloads {
		require.NoError(t, w.WriteFPDU([]byte{0xc1, 0x40}, p))
		require.NoError(t, w.Flush())
		u := <-got
		require.Equal(t, append([]byte{0xc1, 0x40}, p...), u)
	}
	// Waiting for a fourth FPDU, the Reader gives its buffer back.
	errc := make(chan error, 1)
	go func() { _, err := r.Next(); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	require.Error(t, <-errc)
	require.Nil(t, r.buf, "an idle stream holds no buffer")
}
