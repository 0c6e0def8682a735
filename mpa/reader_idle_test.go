package mpa

import (
	"bytes"
	"io"
	"net"
	"os"
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

// AwaitFPDU between FPDUs can be cut short by a deadline and resumed:
// nothing is lost, with or without ReleaseIdle, even when the deadline
// falls after the FPDU's first bytes.
func TestReader_AwaitInterruptible(t *testing.T) {
	for _, release := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		s := <-accepted
		r := NewReader(s, ReaderConfig{CRC: true, ReleaseIdle: release, BufferSize: 4096})
		require.True(t, r.Idle())
		s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		whole, err := r.AwaitFPDU(1 << 16)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.False(t, whole)
		s.SetReadDeadline(time.Time{})
		fb := new(bytes.Buffer)
		fw := NewWriter(fb, WriterConfig{CRC: true})
		require.NoError(t, fw.WriteFPDU([]byte{0xc1, 0x40}, []byte("after the cut")))
		require.NoError(t, fw.Flush())
		frame := fb.Bytes()
		for _, cut := range []int{1, 7} { // inside the length field, inside the payload
			_, err := c.Write(frame[:cut])
			require.NoError(t, err)
			s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			whole, err := r.AwaitFPDU(1 << 16)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "cut at %d", cut)
			require.False(t, whole)
			require.Equal(t, cut, r.Buffered(), "what arrived before the deadline stays")
			require.False(t, r.Whole())
			s.SetReadDeadline(time.Time{})
			_, err = c.Write(frame[cut:])
			require.NoError(t, err)
			whole, err = r.AwaitFPDU(1 << 16)
			require.NoError(t, err)
			require.True(t, whole, "cut at %d", cut)
			require.True(t, r.Whole())
			require.False(t, r.Idle())
			u, err := r.ReadFPDU(make([]byte, 256))
			require.NoError(t, err)
			require.Equal(t, "after the cut", string(u[2:]))
			require.True(t, r.Idle())
		}
		// An FPDU over the limit is left to the usual reads.
		w := NewWriter(c, WriterConfig{CRC: true})
		require.NoError(t, w.WriteFPDU([]byte{0xc1, 0x40}, bytes.Repeat([]byte{9}, 100)))
		require.NoError(t, w.Flush())
		whole, err = r.AwaitFPDU(64)
		require.NoError(t, err)
		require.False(t, whole)
		u, err := r.ReadFPDU(make([]byte, 256))
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{9}, 100), u[2:])
		// Cut in the middle of an FPDU, the stream is broken for good.
		b := new(bytes.Buffer)
		bw := NewWriter(b, WriterConfig{CRC: true})
		require.NoError(t, bw.WriteFPDU([]byte{0xc1, 0x40}, []byte("torn")))
		require.NoError(t, bw.Flush())
		c.Write(b.Bytes()[:5])
		_, err = r.Next()
		require.NoError(t, err)
		s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		require.ErrorIs(t, r.ReadFull(make([]byte, 6)), os.ErrDeadlineExceeded)
		s.SetReadDeadline(time.Time{})
		c.Write(b.Bytes()[5:])
		require.ErrorIs(t, r.End(), os.ErrDeadlineExceeded, "the deadline in the middle of an FPDU stays")
		c.Close()
		s.Close()
		ln.Close()
	}
}

// With markers the Reader strips them as it reads; AwaitFPDU leaves such
// streams to the usual reads.
func TestReader_AwaitFPDUMarkers(t *testing.T) {
	b := new(bytes.Buffer)
	w := NewWriter(b, WriterConfig{CRC: true, Markers: true})
	require.NoError(t, w.WriteFPDU([]byte{0xc1, 0x40}, []byte("marked")))
	require.NoError(t, w.Flush())
	r := NewReader(b, ReaderConfig{CRC: true, Markers: true})
	whole, err := r.AwaitFPDU(1 << 16)
	require.NoError(t, err)
	require.False(t, whole)
	require.False(t, r.Whole())
	u, err := r.ReadFPDU(make([]byte, 64))
	require.NoError(t, err)
	require.Equal(t, "marked", string(u[2:]))
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF, "the stream ended cleanly after the FPDU")
}

func TestReader_AwaitFPDUInsideAnFPDU(t *testing.T) {
	b := new(bytes.Buffer)
	w := NewWriter(b, WriterConfig{})
	require.NoError(t, w.WriteFPDU([]byte{0xc1, 0x40}, []byte("x")))
	require.NoError(t, w.Flush())
	r := NewReader(b, ReaderConfig{})
	_, err := r.Next()
	require.NoError(t, err)
	_, err = r.AwaitFPDU(1 << 16)
	require.ErrorIs(t, err, ErrState)
}
