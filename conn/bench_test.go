package conn

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The benchmarks below measure the library beside the same transfer shape
// over raw Go TCP on the same machine: Write of the message size from a
// reused buffer, io.ReadFull on the other side, TCP_NODELAY (Go's default),
// default socket buffers. Compare the pairs (e.g. BenchmarkWrite/1MiB with
// BenchmarkRawTCPStream/1MiB); nothing here asserts a speed.

var benchSizes = []int{64, 4 << 10, 64 << 10, 1 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func benchPair(b *testing.B) (client, server *endpoint) {
	return connectPair(b, pairConfig{caps: QPCaps{SendDepth: 256, RecvDepth: 256}})
}

// drive posts b.N work requests made by mk, keeping the send queue full,
// signaling every 16th, and waits for all to complete.
func drive(b *testing.B, ep *endpoint, mk func(i int) SendWR) {
	wcs := make([]WorkCompletion, 64)
	inflight := 0 // signaled completions outstanding, in units of 16 WRs
	ctx := context.Background()
	c := startCost()
	defer c.report(b)
	for i := 0; i < b.N; i++ {
		wr := mk(i)
		if i%16 == 15 || i == b.N-1 {
			wr.Flags |= Signaled
			inflight++
		}
		for {
			err := ep.qp.PostSend(wr)
			if err == nil {
				break
			}
			if err != ErrSQFull && err != ErrCQFull {
				b.Fatal(err)
			}
			n, err := ep.cq.Wait(ctx, wcs)
			if err != nil {
				b.Fatal(err)
			}
			inflight -= n
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					b.Fatal(wc.Err())
				}
			}
		}
	}
	for inflight > 0 {
		n, err := ep.cq.Wait(ctx, wcs)
		if err != nil {
			b.Fatal(err)
		}
		inflight -= n
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			client, server := benchPair(b)
			target := server.register(b, size, LocalWrite|RemoteWrite)
			src := client.register(b, size, 0)
			sgl := []SGE{src.SGE(0, size)}
			remote := target.Remote(0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			drive(b, client, func(int) SendWR {
				return SendWR{Op: OpWrite, SGL: sgl, Remote: remote}
			})
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			client, server := benchPair(b)
			source := server.register(b, size, RemoteRead)
			sink := client.register(b, size, LocalWrite)
			sgl := []SGE{sink.SGE(0, size)}
			remote := source.Remote(0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			drive(b, client, func(int) SendWR {
				return SendWR{Op: OpRead, SGL: sgl, Remote: remote}
			})
		})
	}
}

func BenchmarkSend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			client, server := benchPair(b)
			sendStreamOn(b, client, server, size)
		})
	}
}

// sendStreamOn is a stream of size-byte Sends from client to server.
func sendStreamOn(b *testing.B, client, server *endpoint, size int) {
	const depth = 256
	rbuf := server.register(b, size, LocalWrite)
	for i := 0; i < depth; i++ {
		require.NoError(b, server.qp.PostRecv(RecvWR{SGL: []SGE{rbuf.SGE(0, size)}}))
	}
	// The receiver reposts each buffer as its Send completes and
	// grants the sender a credit: a Send without a posted receive
	// is fatal in iWARP, so a real application runs such a credit
	// scheme too (here it is shared memory instead of messages).
	var credits atomic.Int64
	credits.Store(depth)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wcs := make([]WorkCompletion, 64)
		rsgl := []SGE{rbuf.SGE(0, size)}
		for got := 0; got < b.N; {
			n, err := server.cq.Wait(context.Background(), wcs)
			if err != nil {
				return
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					return
				}
				server.qp.PostRecv(RecvWR{SGL: rsgl})
			}
			credits.Add(int64(n))
			got += n
		}
	}()
	src := client.register(b, size, 0)
	sgl := []SGE{src.SGE(0, size)}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	drive(b, client, func(i int) SendWR {
		for credits.Load() <= 0 {
			runtime.Gosched()
		}
		credits.Add(-1)
		return SendWR{Op: OpSend, SGL: sgl}
	})
	<-done
}

// BenchmarkPingPong is the round trip of an 8-byte Send answered by an
// 8-byte Send: one op is one round trip.
func BenchmarkPingPong(b *testing.B) {
	pingPongBench(b, func(qp *QP, buf []SGE, _ RemoteAddr) error {
		return qp.PostSend(SendWR{Op: OpSend, SGL: buf})
	})
}

// BenchmarkPingPongWrite is the round trip of an 8-byte RDMA Write
// announced by a zero-length Send, answered the same way (iWARP toward siw
// has no Write with Immediate): posted together with PostSendBatch, as
// iwarp-peer bench's latency phase does, and as two PostSend calls, as a
// program that writes and then notifies does.
func BenchmarkPingPongWrite(b *testing.B) {
	b.Run("batch", func(b *testing.B) {
		pingPongBench(b, func(qp *QP, buf []SGE, peer RemoteAddr) error {
			// On the poster's stack: one slice shared by both sides'
			// goroutines took its cache line across cores every round trip.
			wrs := [2]SendWR{{Op: OpWrite, SGL: buf, Remote: peer}, {Op: OpSend}}
			_, err := qp.PostSendBatch(wrs[:])
			return err
		})
	})
	b.Run("two-posts", func(b *testing.B) {
		pingPongBench(b, func(qp *QP, buf []SGE, peer RemoteAddr) error {
			if err := qp.PostSend(SendWR{Op: OpWrite, SGL: buf, Remote: peer}); err != nil {
				return err
			}
			return qp.PostSend(SendWR{Op: OpSend})
		})
	})
}

// pingPongBench runs round trips of what post posts, each side answering
// a received Send with the same post from a goroutine blocked in CQ.Wait;
// buf is the side's 8-byte buffer, peer the other side's.
func pingPongBench(b *testing.B, post func(qp *QP, buf []SGE, peer RemoteAddr) error) {
	client, server := benchPair(b)
	pingPongOn(b, client, server, post)
}

// pingPongOn is pingPongBench on a pair already connected.
func pingPongOn(b *testing.B, client, server *endpoint, post func(qp *QP, buf []SGE, peer RemoteAddr) error) {
	cbuf := client.register(b, 8, LocalWrite|RemoteWrite)
	sbuf := server.register(b, 8, LocalWrite|RemoteWrite)
	ssgl, csgl := []SGE{sbuf.SGE(0, 8)}, []SGE{cbuf.SGE(0, 8)}
	require.NoError(b, server.qp.PostRecv(RecvWR{SGL: ssgl}))
	require.NoError(b, client.qp.PostRecv(RecvWR{SGL: csgl}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		wcs := make([]WorkCompletion, 4)
		for {
			n, err := server.cq.Wait(context.Background(), wcs)
			if err != nil {
				return
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					return
				}
				if wc.Op == WCRecv {
					server.qp.PostRecv(RecvWR{SGL: ssgl})
					post(server.qp, ssgl, cbuf.Remote(0))
				}
			}
		}
	}()
	wcs := make([]WorkCompletion, 4)
	b.ReportAllocs()
	b.ResetTimer()
	sw := startCost()
	for i := 0; i < b.N; i++ {
		if err := post(client.qp, csgl, sbuf.Remote(0)); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			n, err := client.cq.Wait(context.Background(), wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Op == WCRecv {
					got = true
					client.qp.PostRecv(RecvWR{SGL: csgl})
				}
			}
		}
	}
	sw.report(b)
	b.StopTimer()
	client.qp.Close()
	server.qp.Close()
	<-done
}

// rawTCPPair returns two ends of a loopback TCP connection.
func rawTCPPair(b testing.TB) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(b, err)
	s := <-ch
	b.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// BenchmarkRawTCPStream is the baseline of BenchmarkWrite and BenchmarkRead.
func BenchmarkRawTCPStream(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			c, s := rawTCPPair(b)
			buf := make([]byte, size)
			done := make(chan error, 1)
			go func() {
				rbuf := make([]byte, size)
				for i := 0; i < b.N; i++ {
					if _, err := io.ReadFull(s, rbuf); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			cost := startCost()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			cost.report(b)
		})
	}
}

// BenchmarkRawTCPMessages is the baseline of BenchmarkSend: each message
// has a 4-byte length prefix and is written with the prefix in one Write
// (the same batching a Send gets: one writev per message when idle).
func BenchmarkRawTCPMessages(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			c, s := rawTCPPair(b)
			buf := make([]byte, 4+size)
			binary.BigEndian.PutUint32(buf, uint32(size))
			done := make(chan error, 1)
			go func() {
				var hdr [4]byte
				rbuf := make([]byte, size)
				for i := 0; i < b.N; i++ {
					if _, err := io.ReadFull(s, hdr[:]); err != nil {
						done <- err
						return
					}
					if _, err := io.ReadFull(s, rbuf[:binary.BigEndian.Uint32(hdr[:])]); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			cost := startCost()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, <-done)
			cost.report(b)
		})
	}
}

// BenchmarkRawTCPPingPong is the baseline of BenchmarkPingPong.
func BenchmarkRawTCPPingPong(b *testing.B) {
	c, s := rawTCPPair(b)
	go func() {
		buf := make([]byte, 8)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 8)
	b.ReportAllocs()
	b.ResetTimer()
	sw := startCost()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
	sw.report(b)
}
