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

// tcpStream is one connection of the baseline of a Write or Read stream:
// size-byte messages in one direction. The sender half-closes after its
// last message and waits for the receiver's one-byte acknowledgement, so
// the time covers the arrival of every byte, as the Read behind an RDMA
// Write stream does. With crc, the messages carry CRC32c (crcSender,
// crcReceiver).
type tcpStream struct {
	cfg      *Config
	crc      bool
	c, s     net.Conn
	src      net.Conn
	stop     func()
	recvDone chan error
}

// newTCPStream connects a stream and starts its receiver, which waits for
// the first message.
func newTCPStream(ctx context.Context, cfg *Config, crc bool) (*tcpStream, error) {
	c, s, err := cfg.streamPair(ctx)
	if err != nil {
		return nil, err
	}
	t := &tcpStream{cfg: cfg, crc: crc, c: c, s: s, stop: closeOnDone(ctx, c, s), recvDone: make(chan error, 1)}
	// For a Read stream the data flows from the server to the client.
	src, dst := c, s
	if cfg.Op == "read" {
		src, dst = s, c
	}
	t.src = src
	go func() {
		buf := make([]byte, cfg.Size)
		r := bufferedReader(dst)
		var cr *crcReceiver
		if crc {
			cr = newCRCReceiver(r, cfg.Size)
		}
		for {
			var err error
			if cr != nil {
				err = cr.read(buf)
			} else {
				_, err = io.ReadFull(r, buf)
			}
			if err != nil {
				if err == io.EOF {
					_, err = dst.Write([]byte{1})
				}
				t.recvDone <- err
				return
			}
		}
	}()
	return t, nil
}

func (t *tcpStream) close() {
	t.stop()
	t.c.Close()
	t.s.Close()
}

// run sends the stream from start on.
func (t *tcpStream) run(start time.Time, prog *progress.Line) (phaseResult, error) {
	cfg := t.cfg
	buf := make([]byte, cfg.Size)
	fill(buf)
	var cs *crcSender
	if t.crc {
		cs = newCRCSender(buf, 0)
	}
	stop := newStopper(cfg, start)
	var n int64
	for last := false; !last; n++ {
		last = stop.last(n)
		var err error
		if cs != nil {
			err = cs.write(t.src)
		} else {
			_, err = t.src.Write(buf)
		}
		if err != nil {
			return phaseResult{}, err
		}
		prog.Add(1)
	}
	if err := closeWrite(t.src); err != nil {
		return phaseResult{}, err
	}
	var ack [1]byte
	if _, err := io.ReadFull(t.src, ack[:]); err != nil {
		return phaseResult{}, fmt.Errorf("waiting for the receiver: %w", err)
	}
	elapsed := time.Since(start)
	if err := <-t.recvDone; err != nil {
		return phaseResult{}, err
	}
	return phaseResult{messages: n, bytes: n * int64(cfg.Size), elapsed: elapsed}, nil
}

// The length prefix of a message in the Send baseline; its top bit is
// the Solicited Event flag's counterpart.
const tcpSolicited = 1 << 31

// tcpMessages is one connection of the baseline of a Send stream: each
// message carries a 4-byte length prefix and goes out in one Write with it
// (with crc: and its CRC32c sums, in one writev), and the same credit scheme as streamSend runs over the reverse
// direction (credits, batch and the solicited flag alike).
type tcpMessages struct {
	cfg       *Config
	crc       bool
	c, s      net.Conn
	stop      func()
	wg        sync.WaitGroup
	recvErr   chan error
	creditErr chan error
	credits   atomic.Int64
	returned  chan struct{}
}

// newTCPMessages connects a Send stream and starts its receiver and the
// sender's credit reader, which wait for the first message.
func newTCPMessages(ctx context.Context, cfg *Config, crc bool) (*tcpMessages, error) {
	c, s, err := cfg.streamPair(ctx)
	if err != nil {
		return nil, err
	}
	t := &tcpMessages{cfg: cfg, crc: crc, c: c, s: s, stop: closeOnDone(ctx, c, s),
		recvErr: make(chan error, 1), creditErr: make(chan error, 1), returned: make(chan struct{}, 1)}
	batch := int(cfg.creditBatch())
	t.credits.Store(int64(cfg.credits()))
	t.wg.Add(2)
	go func() { // the receiver
		defer t.wg.Done()
		var hdr, credit [4]byte
		buf := make([]byte, cfg.Size)
		r := bufferedReader(s)
		var cr *crcReceiver
		if crc {
			cr = newCRCReceiver(r, cfg.Size)
		}
		pending := 0
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				if err == io.EOF {
					err = nil
				}
				t.recvErr <- err
				return
			}
			h := binary.BigEndian.Uint32(hdr[:])
			msg := buf[:min(int(h&^tcpSolicited), len(buf))]
			var err error
			if cr != nil {
				err = noEOF(cr.read(msg))
			} else {
				_, err = io.ReadFull(r, msg)
			}
			if err != nil {
				t.recvErr <- err
				return
			}
			pending++
			if pending >= batch || h&tcpSolicited != 0 {
				binary.BigEndian.PutUint32(credit[:], uint32(pending))
				if _, err := s.Write(credit[:]); err != nil {
					t.recvErr <- err
					return
				}
				pending = 0
			}
		}
	}()
	go func() { // the sender's credit reader
		defer t.wg.Done()
		var credit [4]byte
		r := bufferedReader(c)
		for {
			if _, err := io.ReadFull(r, credit[:]); err != nil {
				t.creditErr <- err
				return
			}
			t.credits.Add(int64(binary.BigEndian.Uint32(credit[:])))
			select {
			case t.returned <- struct{}{}:
			default:
			}
		}
	}()
	return t, nil
}

func (t *tcpMessages) close() {
	t.stop()
	t.c.Close()
	t.s.Close()
	t.wg.Wait()
}

// run sends the stream from start on.
func (t *tcpMessages) run(ctx context.Context, start time.Time, prog *progress.Line) (phaseResult, error) {
	cfg := t.cfg
	total := int64(cfg.credits())
	waitCredits := func(cond func() bool) error {
		for !cond() {
			select {
			case <-t.returned:
			case err := <-t.creditErr:
				return fmt.Errorf("credit messages: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	msg := make([]byte, 4+cfg.Size)
	fill(msg[4:])
	var cs *crcSender
	if t.crc {
		cs = newCRCSender(msg, 4)
	}
	stop := newStopper(cfg, start)
	var n int64
	for last := false; !last; n++ {
		if err := waitCredits(func() bool { return t.credits.Load() > 0 }); err != nil {
			return phaseResult{}, err
		}
		last = stop.last(n)
		h := uint32(cfg.Size)
		if t.credits.Load() == 1 || last {
			h |= tcpSolicited
		}
		binary.BigEndian.PutUint32(msg, h)
		t.credits.Add(-1)
		var err error
		if cs != nil {
			err = cs.write(t.c)
		} else {
			_, err = t.c.Write(msg)
		}
		if err != nil {
			return phaseResult{}, err
		}
		prog.Add(1)
	}
	if err := waitCredits(func() bool { return t.credits.Load() == total }); err != nil {
		return phaseResult{}, err
	}
	elapsed := time.Since(start)
	// Stop both goroutines: the sender's FIN ends the receiver, whose
	// FIN ends the credit reader.
	closeWrite(t.c)
	if err := <-t.recvErr; err != nil {
		return phaseResult{}, err
	}
	closeWrite(t.s)
	if err := <-t.creditErr; err != nil && !errors.Is(err, io.EOF) {
		return phaseResult{}, err
	}
	return phaseResult{messages: n, bytes: n * int64(cfg.Size), elapsed: elapsed}, nil
}

// tcpStreams is the baseline of a bandwidth phase: cfg.QPs connections,
// set up first, then streaming at once (together). With crc each carries
// CRC32c per 64 KiB, computed and checked on both ends.
func tcpStreams(ctx context.Context, cfg *Config, crc bool, prog *progress.Line) (phaseResult, error) {
	type link struct {
		run   func(start time.Time) (phaseResult, error)
		close func()
	}
	links := make([]link, 0, cfg.qps())
	defer func() {
		for _, l := range links {
			l.close()
		}
	}()
	for range cfg.qps() {
		if cfg.Op == "send" {
			t, err := newTCPMessages(ctx, cfg, crc)
			if err != nil {
				return phaseResult{}, err
			}
			links = append(links, link{func(start time.Time) (phaseResult, error) { return t.run(ctx, start, prog) }, t.close})
		} else {
			t, err := newTCPStream(ctx, cfg, crc)
			if err != nil {
				return phaseResult{}, err
			}
			links = append(links, link{func(start time.Time) (phaseResult, error) { return t.run(start, prog) }, t.close})
		}
	}
	return timedTogether(cfg.Loopback, len(links), func(i int, start time.Time) (phaseResult, error) { return links[i].run(start) })
}

// tcpPingPong is the baseline of pingPong: size bytes answered by size
// bytes (Send and Write), or a 28-byte request — an RDMA Read Request's
// size — answered by size bytes (Read).
func tcpPingPong(ctx context.Context, cfg *Config, prog *progress.Line) ([]time.Duration, *float64, error) {
	c, s, err := cfg.streamPair(ctx)
	if err != nil {
		return nil, nil, err
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
	var cpu cpuClock
	start := time.Now()
	stop := cfg.latStopper(start)
	for i := int64(0); ; i++ {
		t := time.Now()
		counted := !cfg.warmingUp(i, start, t)
		if counted {
			t = cpu.begin(t)
		}
		if _, err := c.Write(req); err != nil {
			return nil, nil, err
		}
		if _, err := io.ReadFull(r, resp); err != nil {
			return nil, nil, err
		}
		d := time.Since(t)
		if counted {
			samples = append(samples, d)
			prog.Add(1)
		}
		if stop.last(i) {
			break
		}
	}
	perRT := cpu.perRoundTrip(len(samples))
	closeWrite(c)
	if err := <-echoDone; err != nil {
		return nil, nil, err
	}
	return samples, perRT, nil
}

// tcpResult is what the baseline measured: the stream, the stream with
// CRC32c (with cfg.CRC), the ping-pong and the CPU time of its round trips.
type tcpResult struct {
	bw, crc phaseResult
	lat     []time.Duration
	latCPU  *float64
}

// tcpBench runs the baseline's phases: the stream over cfg.QPs
// connections, with cfg.CRC the same with CRC32c, then the ping-pong.
func tcpBench(ctx context.Context, cfg *Config) (res tcpResult, err error) {
	label := fmt.Sprintf("raw TCP %s %s", cfg.Op, units.Bytes(int64(cfg.Size)))
	prog := progress.Start(cfg.Progress, label, cfg.Iters*cfg.qps(), cfg.Duration)
	res.bw, err = tcpStreams(ctx, cfg, false, prog)
	prog.Finish()
	if err != nil {
		return res, fmt.Errorf("raw TCP stream: %w", err)
	}
	if cfg.CRC {
		prog = progress.Start(cfg.Progress, label+" with CRC32c", cfg.Iters*cfg.qps(), cfg.Duration)
		res.crc, err = tcpStreams(ctx, cfg, true, prog)
		prog.Finish()
		if err != nil {
			return res, fmt.Errorf("raw TCP stream with CRC32c: %w", err)
		}
	}
	if !cfg.hasLatency() {
		return res, nil
	}
	prog = progress.Start(cfg.Progress, label+" latency", cfg.LatIters, cfg.latDuration())
	res.lat, res.latCPU, err = tcpPingPong(ctx, cfg, prog)
	prog.Finish()
	if err != nil {
		return res, fmt.Errorf("raw TCP ping-pong: %w", err)
	}
	return res, nil
}
