package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/progress"
	"github.com/iwarp-go/iwarp-go/internal/units"
)

// The raw TCP baseline moves the same messages the same way over a plain
// Go TCP connection on the same machine in the same run: one Write per
// message from a reused buffer, io.ReadFull on the other side through a
// 32 KiB buffered reader (the buffer iwarp-go's connections give their
// FPDU reader),
// TCP_NODELAY (Go's default, as for iwarp-go's connections) and the
// default socket buffers (iwarp-go does not change them either). The
// baseline does not coalesce messages into one write; iwarp-go's
// transmitter does, for work posted while it is busy.

// tcpReadBuffer is the reader buffer of conn's engine (readerBuffer).
const tcpReadBuffer = 32 << 10

func bufferedReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, tcpReadBuffer) }

// tcpPair connects two ends of a loopback TCP connection.
func tcpPair(ctx context.Context) (client, server net.Conn, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	var d net.Dialer
	client, err = d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		<-ch
		return nil, nil, err
	}
	a := <-ch
	if a.err != nil {
		client.Close()
		return nil, nil, a.err
	}
	return client, a.c, nil
}

// closeOnDone closes the connections when ctx ends, so that blocked reads
// and writes return; the returned function stops it.
func closeOnDone(ctx context.Context, cs ...net.Conn) func() {
	stop := context.AfterFunc(ctx, func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return func() { stop() }
}

// tcpStream measures size-byte messages in one direction: the stream a
// Write or Read stream moves. The sender half-closes after its last
// message and waits for the receiver's one-byte acknowledgement, so the
// time covers the arrival of every byte, as the Read behind an RDMA Write
// stream does.
func tcpStream(ctx context.Context, cfg *Config, prog *progress.Line) (phaseResult, error) {
	c, s, err := tcpPair(ctx)
	if err != nil {
		return phaseResult{}, err
	}
	defer c.Close()
	defer s.Close()
	defer closeOnDone(ctx, c, s)()
	// For a Read stream the data flows from the server to the client.
	src, dst := c, s
	if cfg.Op == "read" {
		src, dst = s, c
	}
	recvDone := make(chan error, 1)
	go func() {
		buf := make([]byte, cfg.Size)
		r := bufferedReader(dst)
		for {
			if _, err := io.ReadFull(r, buf); err != nil {
				if err == io.EOF {
					_, err = dst.Write([]byte{1})
				}
				recvDone <- err
				return
			}
		}
	}()
	buf := make([]byte, cfg.Size)
	fill(buf)
	start := time.Now()
	stop := newStopper(cfg, start)
	var n int64
	for last := false; !last; n++ {
		last = stop.last(n)
		if _, err := src.Write(buf); err != nil {
			return phaseResult{}, err
		}
		prog.Add(1)
	}
	if err := src.(*net.TCPConn).CloseWrite(); err != nil {
		return phaseResult{}, err
	}
	var ack [1]byte
	if _, err := io.ReadFull(src, ack[:]); err != nil {
		return phaseResult{}, fmt.Errorf("waiting for the receiver: %w", err)
	}
	elapsed := time.Since(start)
	if err := <-recvDone; err != nil {
		return phaseResult{}, err
	}
	return phaseResult{messages: n, bytes: n * int64(cfg.Size), elapsed: elapsed}, nil
}

// The length prefix of a message in the Send baseline; its top bit is
// the Solicited Event flag's counterpart.
const tcpSolicited = 1 << 31

// tcpMessages is the baseline of a Send stream: each message carries a
// 4-byte length prefix and goes out in one Write with it, and the same
// credit scheme as streamSend runs over the reverse direction (credits,
// batch and the solicited flag alike).
func tcpMessages(ctx context.Context, cfg *Config, prog *progress.Line) (phaseResult, error) {
	c, s, err := tcpPair(ctx)
	if err != nil {
		return phaseResult{}, err
	}
	total := int64(cfg.credits())
	batch := int(cfg.creditBatch())
	var wg sync.WaitGroup
	defer func() {
		c.Close()
		s.Close()
		wg.Wait()
	}()
	defer closeOnDone(ctx, c, s)()
	recvErr := make(chan error, 1)
	wg.Add(1)
	go func() { // the receiver
		defer wg.Done()
		var hdr, credit [4]byte
		buf := make([]byte, cfg.Size)
		r := bufferedReader(s)
		pending := 0
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				if err == io.EOF {
					err = nil
				}
				recvErr <- err
				return
			}
			h := binary.BigEndian.Uint32(hdr[:])
			if _, err := io.ReadFull(r, buf[:h&^tcpSolicited]); err != nil {
				recvErr <- err
				return
			}
			pending++
			if pending >= batch || h&tcpSolicited != 0 {
				binary.BigEndian.PutUint32(credit[:], uint32(pending))
				if _, err := s.Write(credit[:]); err != nil {
					recvErr <- err
					return
				}
				pending = 0
			}
		}
	}()
	var credits atomic.Int64
	credits.Store(total)
	returned := make(chan struct{}, 1)
	creditErr := make(chan error, 1)
	wg.Add(1)
	go func() { // the sender's credit reader
		defer wg.Done()
		var credit [4]byte
		r := bufferedReader(c)
		for {
			if _, err := io.ReadFull(r, credit[:]); err != nil {
				creditErr <- err
				return
			}
			credits.Add(int64(binary.BigEndian.Uint32(credit[:])))
			select {
			case returned <- struct{}{}:
			default:
			}
		}
	}()
	waitCredits := func(cond func() bool) error {
		for !cond() {
			select {
			case <-returned:
			case err := <-creditErr:
				return fmt.Errorf("credit messages: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}

	msg := make([]byte, 4+cfg.Size)
	fill(msg[4:])
	start := time.Now()
	stop := newStopper(cfg, start)
	var n int64
	for last := false; !last; n++ {
		if err := waitCredits(func() bool { return credits.Load() > 0 }); err != nil {
			return phaseResult{}, err
		}
		last = stop.last(n)
		h := uint32(cfg.Size)
		if credits.Load() == 1 || last {
			h |= tcpSolicited
		}
		binary.BigEndian.PutUint32(msg, h)
		credits.Add(-1)
		if _, err := c.Write(msg); err != nil {
			return phaseResult{}, err
		}
		prog.Add(1)
	}
	if err := waitCredits(func() bool { return credits.Load() == total }); err != nil {
		return phaseResult{}, err
	}
	elapsed := time.Since(start)
	// Stop both goroutines: the sender's FIN ends the receiver, whose
	// FIN ends the credit reader.
	c.(*net.TCPConn).CloseWrite()
	if err := <-recvErr; err != nil {
		return phaseResult{}, err
	}
	s.(*net.TCPConn).CloseWrite()
	if err := <-creditErr; err != nil && !errors.Is(err, io.EOF) {
		return phaseResult{}, err
	}
	return phaseResult{messages: n, bytes: n * int64(cfg.Size), elapsed: elapsed}, nil
}

// tcpPingPong is the baseline of pingPong: size bytes answered by size
// bytes (Send and Write), or a 28-byte request — an RDMA Read Request's
// size — answered by size bytes (Read).
func tcpPingPong(ctx context.Context, cfg *Config, prog *progress.Line) ([]time.Duration, error) {
	c, s, err := tcpPair(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	defer s.Close()
	defer closeOnDone(ctx, c, s)()
	reqLen := cfg.Size
	if cfg.Op == "read" {
		reqLen = 28
	}
	echoDone := make(chan error, 1)
	go func() {
		req := make([]byte, reqLen)
		resp := make([]byte, cfg.Size)
		r := bufferedReader(s)
		for {
			if _, err := io.ReadFull(r, req); err != nil {
				if err == io.EOF {
					err = nil
				}
				echoDone <- err
				return
			}
			if _, err := s.Write(resp); err != nil {
				echoDone <- err
				return
			}
		}
	}()
	req := make([]byte, reqLen)
	resp := make([]byte, cfg.Size)
	r := bufferedReader(c)
	samples := make([]time.Duration, 0, cfg.latSamplesHint())
	start := time.Now()
	stop := cfg.latStopper(start)
	for i := int64(0); ; i++ {
		t := time.Now()
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(r, resp); err != nil {
			return nil, err
		}
		d := time.Since(t)
		if !cfg.warmingUp(i, start, t) {
			samples = append(samples, d)
			prog.Add(1)
		}
		if stop.last(i) {
			break
		}
	}
	c.(*net.TCPConn).CloseWrite()
	if err := <-echoDone; err != nil {
		return nil, err
	}
	return samples, nil
}

// tcpBench runs the baseline's two phases.
func tcpBench(ctx context.Context, cfg *Config) (bw phaseResult, lat []time.Duration, err error) {
	prog := progress.Start(cfg.Progress, fmt.Sprintf("raw TCP %s %s", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.Iters, cfg.Duration)
	if cfg.Op == "send" {
		bw, err = tcpMessages(ctx, cfg, prog)
	} else {
		bw, err = tcpStream(ctx, cfg, prog)
	}
	prog.Finish()
	if err != nil {
		return bw, nil, fmt.Errorf("raw TCP stream: %w", err)
	}
	if !cfg.hasLatency() {
		return bw, nil, nil
	}
	prog = progress.Start(cfg.Progress, fmt.Sprintf("raw TCP %s %s latency", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.LatIters, cfg.latDuration())
	lat, err = tcpPingPong(ctx, cfg, prog)
	prog.Finish()
	if err != nil {
		return bw, nil, fmt.Errorf("raw TCP ping-pong: %w", err)
	}
	return bw, lat, nil
}
