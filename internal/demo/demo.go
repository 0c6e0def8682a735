package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/internal/rping"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
	"github.com/iwarp-go/iwarp-go/stag"
)

// Sizes of the demo's transfers.
const (
	demoRegion = 1 << 20 // the server's exposed region, and each RDMA message
	demoHello  = 4 << 10 // the first Send's payload
	demoBulk   = 64      // RDMA messages in each throughput run
	demoWindow = 16      // RDMA work requests in flight
	demoPings  = 2000    // ping-pong round trips
	// A recorded run moves less, to keep the capture small.
	demoBulkRecorded  = 2
	demoPingsRecorded = 20
	demoSlots         = 4 // receive buffers posted by each side
	demoMsgMax        = 8 + demoHello
)

// Demo messages: an 8-byte header (type, three reserved bytes, a
// big-endian 32-bit argument) and a body.
const (
	msgHello    = 'H' // arg: pattern seed of the body
	msgAdvert   = 'A' // body: the server region as {TO, STag, length}
	msgWritten  = 'W' // arg: the pattern seed the client wrote into the region
	msgVerified = 'V' // arg: the pattern seed the server then filled it with
	msgFailed   = 'F' // body: what the server found wrong
	msgPing     = 'P'
	msgBye      = 'B'
)

// hooks let tests break the demo on purpose: each may change the
// server's region at the moment named.
type hooks struct {
	beforeVerify func(region []byte)
	afterFill    func(region []byte)
}

// Config is one run of the demo.
type Config struct {
	// Pcap, if not "", is the file the client's connection is recorded
	// into.
	Pcap string
	// Out receives the demo's account of each step.
	Out io.Writer
	// Options are connection options for both ends (a logger, say).
	Options []conn.Option

	hooks hooks // tests only
}

// pattern fills b with the bytes of seed: distinct per seed and per
// position, so that misplaced, stale or shifted data is caught.
func pattern(b []byte, seed uint32) {
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x >> 24)
	}
}

// checkPattern reports the first byte of b that differs from pattern seed.
func checkPattern(b []byte, seed uint32) error {
	want := make([]byte, len(b))
	pattern(want, seed)
	for i := range b {
		if b[i] != want[i] {
			return fmt.Errorf("byte %d of %d is %#02x, want %#02x", i, len(b), b[i], want[i])
		}
	}
	return nil
}

func putMsg(b []byte, typ byte, arg uint32, body []byte) int {
	b[0], b[1], b[2], b[3] = typ, 0, 0, 0
	binary.BigEndian.PutUint32(b[4:8], arg)
	return 8 + copy(b[8:], body)
}

func parseMsg(b []byte) (typ byte, arg uint32, body []byte, err error) {
	if len(b) < 8 {
		return 0, 0, nil, fmt.Errorf("message of %d bytes, shorter than its header", len(b))
	}
	return b[0], binary.BigEndian.Uint32(b[4:8]), b[8:], nil
}

// demoServer answers the client's messages.
type demoServer struct {
	qp     *conn.QP
	cq     *waiter.Waiter
	region *conn.MR
	inbox  *conn.MR
	outbox *conn.MR
	hooks  hooks
}

func newDemoServer(hooks hooks) (*demoServer, error) {
	pd := conn.NewPD()
	cq := conn.NewCQ(64)
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: 16, RecvDepth: demoSlots})
	if err != nil {
		return nil, err
	}
	s := &demoServer{qp: qp, cq: waiter.New(cq, qp), hooks: hooks}
	s.region, err = pd.Register(make([]byte, demoRegion), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	if err == nil {
		s.inbox, err = pd.Register(make([]byte, demoSlots*demoMsgMax), conn.LocalWrite)
	}
	if err == nil {
		s.outbox, err = pd.Register(make([]byte, demoMsgMax), 0)
	}
	for i := 0; err == nil && i < demoSlots; i++ {
		err = s.postRecv(i)
	}
	if err != nil {
		qp.Close()
		return nil, err
	}
	return s, nil
}

func (s *demoServer) postRecv(slot int) error {
	return s.qp.PostRecv(conn.RecvWR{ID: uint64(slot), SGL: []conn.SGE{s.inbox.SGE(slot*demoMsgMax, demoMsgMax)}})
}

// serve handles messages until the client says goodbye.
func (s *demoServer) serve(ctx context.Context) error {
	for {
		wc, err := s.cq.WaitFor(ctx, conn.WCRecv)
		if err != nil {
			return err
		}
		slot := int(wc.ID)
		typ, arg, body, err := parseMsg(s.inbox.Bytes()[slot*demoMsgMax : slot*demoMsgMax+int(wc.ByteLen)])
		if err != nil {
			return err
		}
		out := s.outbox.Bytes()
		var n int
		switch typ {
		case msgHello:
			if err := checkPattern(body, arg); err != nil {
				return fmt.Errorf("server: hello message: %w", err)
			}
			// The region is advertised as rping advertises its buffers.
			adv := rping.AppendInfo(nil, rping.Info{Addr: s.region.Remote(0).TO, RKey: uint32(s.region.STag()), Size: demoRegion})
			n = putMsg(out, msgAdvert, 0, adv)
		case msgWritten:
			if s.hooks.beforeVerify != nil {
				s.hooks.beforeVerify(s.region.Bytes())
			}
			if err := checkPattern(s.region.Bytes(), arg); err != nil {
				n = putMsg(out, msgFailed, 0, []byte(err.Error()))
				break
			}
			// New content for the client to read back: a Read that
			// returned the client's own bytes would prove nothing.
			pattern(s.region.Bytes(), arg+1)
			if s.hooks.afterFill != nil {
				s.hooks.afterFill(s.region.Bytes())
			}
			n = putMsg(out, msgVerified, arg+1, nil)
		case msgPing:
			n = putMsg(out, msgPing, arg, body)
		case msgBye:
			return nil
		default:
			return fmt.Errorf("server: unknown message type %#02x", typ)
		}
		if err := s.postRecv(slot); err != nil {
			return err
		}
		if err := s.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{s.outbox.SGE(0, n)}}); err != nil {
			return err
		}
		// The outbox is rewritten for the next answer only after this Send.
		if _, err := s.cq.WaitFor(ctx, conn.WCSend); err != nil {
			return err
		}
	}
}

// demoClient drives the demo.
type demoClient struct {
	qp     *conn.QP
	cq     *waiter.Waiter
	src    *conn.MR // Write source
	back   *conn.MR // Read sink
	inbox  *conn.MR
	outbox *conn.MR
	remote conn.RemoteAddr
}

func newDemoClient() (*demoClient, error) {
	pd := conn.NewPD()
	cq := conn.NewCQ(128)
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: 2 * demoWindow, RecvDepth: demoSlots})
	if err != nil {
		return nil, err
	}
	c := &demoClient{qp: qp, cq: waiter.New(cq, qp)}
	c.src, err = pd.Register(make([]byte, demoRegion), 0)
	if err == nil {
		c.back, err = pd.Register(make([]byte, demoRegion), conn.LocalWrite)
	}
	if err == nil {
		c.inbox, err = pd.Register(make([]byte, demoMsgMax), conn.LocalWrite)
	}
	if err == nil {
		c.outbox, err = pd.Register(make([]byte, demoMsgMax), 0)
	}
	if err == nil {
		err = c.postRecv()
	}
	if err != nil {
		qp.Close()
		return nil, err
	}
	return c, nil
}

func (c *demoClient) postRecv() error {
	return c.qp.PostRecv(conn.RecvWR{SGL: []conn.SGE{c.inbox.SGE(0, demoMsgMax)}})
}

// request sends one message and returns the server's answer. One receive
// is always posted, and the next message is built only after the Send of
// the last one completed.
func (c *demoClient) request(ctx context.Context, typ byte, arg uint32, body []byte) (byte, uint32, []byte, error) {
	n := putMsg(c.outbox.Bytes(), typ, arg, body)
	if err := c.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{c.outbox.SGE(0, n)}}); err != nil {
		return 0, 0, nil, err
	}
	if _, err := c.cq.WaitFor(ctx, conn.WCSend); err != nil {
		return 0, 0, nil, err
	}
	wc, err := c.cq.WaitFor(ctx, conn.WCRecv)
	if err != nil {
		return 0, 0, nil, err
	}
	rtyp, rarg, rbody, err := parseMsg(c.inbox.Bytes()[:wc.ByteLen])
	if err != nil {
		return 0, 0, nil, err
	}
	if rtyp == msgFailed {
		err = fmt.Errorf("the server reports: %s", rbody)
	}
	rbody = append([]byte(nil), rbody...) // the repost below may overwrite the inbox
	if perr := c.postRecv(); err == nil {
		err = perr
	}
	return rtyp, rarg, rbody, err
}

// stream posts count RDMA work requests of op, keeping demoWindow in
// flight and signalling every eighth, and waits until all completed.
func (c *demoClient) stream(ctx context.Context, op conn.Op, count int) error {
	sgl := []conn.SGE{c.src.SGE(0, demoRegion)}
	wcOp := conn.WCRDMAWrite
	if op == conn.OpRead {
		sgl = []conn.SGE{c.back.SGE(0, demoRegion)}
		wcOp = conn.WCRDMARead
	}
	const every = 8
	signaled := 0 // signalled work requests not yet completed
	for i := 0; i < count; i++ {
		wr := conn.SendWR{Op: op, SGL: sgl, Remote: c.remote}
		if i%every == every-1 || i == count-1 {
			wr.Flags = conn.Signaled
		}
		for signaled*every >= demoWindow {
			if _, err := c.cq.WaitFor(ctx, wcOp); err != nil {
				return err
			}
			signaled--
		}
		if err := c.qp.PostSend(wr); err != nil {
			return err
		}
		if wr.Flags != 0 {
			signaled++
		}
	}
	for ; signaled > 0; signaled-- {
		if _, err := c.cq.WaitFor(ctx, wcOp); err != nil {
			return err
		}
	}
	return nil
}

// readFence posts a small RDMA Read behind earlier Writes and waits for
// it: RDMAP places a Read Response only after the Writes before its
// request, so its completion means the Writes are in the peer's memory.
func (c *demoClient) readFence(ctx context.Context) error {
	wr := conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.back.SGE(0, 8)}, Remote: c.remote}
	if err := c.qp.PostSend(wr); err != nil {
		return err
	}
	_, err := c.cq.WaitFor(ctx, conn.WCRDMARead)
	return err
}

// Run runs the whole demonstration and writes its account to cfg.Out: a
// client and a server in this process over loopback TCP, Send/Receive
// both ways, an RDMA Write and an RDMA Read of a 1 MiB region, streams of
// each, a ping-pong, and a durable write into a file served as remote
// persistent memory, with every byte checked.
func Run(ctx context.Context, cfg Config) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out := cfg.Out
	tap, closeTap, err := openPcapTap(cfg.Pcap)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeTap(); err == nil && cerr != nil {
			err = fmt.Errorf("recording the capture: %w", cerr)
		}
	}()

	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", cfg.Options...)
	if err != nil {
		return err
	}
	defer ln.Close()
	srv, err := newDemoServer(cfg.hooks)
	if err != nil {
		return err
	}
	defer srv.qp.Close()
	cli, err := newDemoClient()
	if err != nil {
		return err
	}
	defer cli.qp.Close()

	// The server accepts and then answers messages until the client says
	// goodbye; its failure ends the client's waits through the connection.
	srvErr := make(chan error, 1)
	go func() {
		err := ln.Accept(ctx, srv.qp)
		if err == nil {
			err = srv.serve(ctx)
		}
		if err != nil {
			srv.qp.Abort()
		}
		srvErr <- err
	}()
	fail := func(step string, err error) error {
		ln.Close() // a server still waiting for the connection stops
		cli.qp.Abort()
		if serr := <-srvErr; serr != nil {
			return fmt.Errorf("%s: %w (server: %v)", step, err, serr)
		}
		return fmt.Errorf("%s: %w", step, err)
	}

	opts := slices.Clone(cfg.Options)
	if tap != nil {
		opts = append(opts, conn.WithTap(tap))
	}
	fmt.Fprintln(out, "iwarp-go demo: an iWARP client and server in one process, over loopback TCP")
	t0 := time.Now()
	if err := cli.qp.Connect(ctx, "tcp", ln.Addr().String(), opts...); err != nil {
		return fail("connect", err)
	}
	fmt.Fprintf(out, "connected %v -> %v in %s\n", cli.qp.LocalAddr(), cli.qp.RemoteAddr(), units.Duration(time.Since(t0)))
	fmt.Fprintf(out, "  negotiated: %s\n", negotiated.Describe(cli.qp.Negotiated()))
	bulk, pings := demoBulk, demoPings
	if cfg.Pcap != "" {
		bulk, pings = demoBulkRecorded, demoPingsRecorded
		fmt.Fprintf(out, "  recording the client's side into %s (fewer, slower transfers while recording)\n", cfg.Pcap)
	}
	fmt.Fprintln(out)

	var moved int64
	// 1. Send/Receive both ways: a patterned hello; the answer carries
	// the server's region, as rping advertises its buffers.
	hello := make([]byte, demoHello)
	pattern(hello, 1)
	typ, _, body, err := cli.request(ctx, msgHello, 1, hello)
	if err == nil && typ != msgAdvert {
		err = fmt.Errorf("answer of type %q, want %q", typ, msgAdvert)
	}
	var adv rping.Info
	if err == nil {
		adv, err = rping.ParseInfo(body)
	}
	if err != nil {
		return fail("send/receive", err)
	}
	moved += demoHello + 8 + 8 + rping.InfoLen
	cli.remote = conn.RemoteAddr{STag: stag.STag(adv.RKey), TO: adv.Addr}
	fmt.Fprintf(out, "  send   client -> server  %9s  received intact by the server\n", units.Bytes(demoHello+8))
	fmt.Fprintf(out, "  send   server -> client  %9s  the server's region: STag %#08x, TO %#x, %s\n",
		units.Bytes(8+rping.InfoLen), adv.RKey, adv.Addr, units.Bytes(int64(adv.Size)))

	// 2. One RDMA Write of the whole region, checked by the server.
	pattern(cli.src.Bytes(), 2)
	if err := cli.stream(ctx, conn.OpWrite, 1); err != nil {
		return fail("rdma write", err)
	}
	if err := cli.verifyWritten(ctx, 2); err != nil {
		return fail("rdma write", err)
	}
	moved += demoRegion
	fmt.Fprintf(out, "  write  client -> server  %9s  every byte checked by the server\n", units.Bytes(demoRegion))

	// 3. One RDMA Read of the region, which the server refilled.
	if err := cli.stream(ctx, conn.OpRead, 1); err != nil {
		return fail("rdma read", err)
	}
	if err := checkPattern(cli.back.Bytes(), 3); err != nil {
		return fail("rdma read", err)
	}
	moved += demoRegion
	fmt.Fprintf(out, "  read   server -> client  %9s  every byte checked by the client\n", units.Bytes(demoRegion))

	// 4. Throughput: a stream of Writes, then of Reads, each verified.
	fmt.Fprintf(out, "\nthroughput: %d messages of %s, %d in flight\n", bulk, units.Bytes(demoRegion), demoWindow)
	pattern(cli.src.Bytes(), 4)
	total := int64(bulk) * demoRegion
	t0 = time.Now()
	err = cli.stream(ctx, conn.OpWrite, bulk)
	if err == nil {
		err = cli.readFence(ctx)
	}
	d := time.Since(t0)
	if err == nil {
		err = cli.verifyWritten(ctx, 4)
	}
	if err != nil {
		return fail("rdma write stream", err)
	}
	moved += total
	fmt.Fprintf(out, "  rdma write  %s in %s = %s (until a Read behind them returned)\n", units.Bytes(total), units.Duration(d), units.Rate(total, d))
	t0 = time.Now()
	err = cli.stream(ctx, conn.OpRead, bulk)
	d = time.Since(t0)
	if err == nil {
		err = checkPattern(cli.back.Bytes(), 5)
	}
	if err != nil {
		return fail("rdma read stream", err)
	}
	moved += total
	fmt.Fprintf(out, "  rdma read   %s in %s = %s\n", units.Bytes(total), units.Duration(d), units.Rate(total, d))

	// 5. Latency: 8-byte Sends answered by 8-byte Sends.
	samples := make([]time.Duration, pings)
	for i := range samples {
		t := time.Now()
		typ, arg, _, err := cli.request(ctx, msgPing, uint32(i), nil)
		samples[i] = time.Since(t)
		if err == nil && (typ != msgPing || arg != uint32(i)) {
			err = fmt.Errorf("ping %d answered by %q %d", i, typ, arg)
		}
		if err != nil {
			return fail("ping-pong", err)
		}
	}
	moved += 2 * 8 * int64(pings)
	p50, p99 := units.Latency(samples)
	fmt.Fprintf(out, "\nlatency: %d round trips of an 8-byte Send answered by an 8-byte Send\n", pings)
	fmt.Fprintf(out, "  median %s, 99th percentile %s\n", units.Duration(p50), units.Duration(p99))

	// 6. A durable write: a file served as remote persistent memory.
	n, err := durable(ctx, out)
	if err != nil {
		return fail("durable write", err)
	}
	moved += n

	// Goodbye: the server ends its loop; both sides close.
	if err := cli.send(ctx, msgBye); err != nil {
		return fail("goodbye", err)
	}
	if err := <-srvErr; err != nil {
		return fmt.Errorf("server: %w", err)
	}
	cli.qp.Close()
	srv.qp.Close()
	fmt.Fprintf(out, "\nOK: %s moved, every byte verified\n", units.Bytes(moved))
	return nil
}

// verifyWritten asks the server to check that its region holds pattern
// seed; the server then fills it with seed+1.
func (c *demoClient) verifyWritten(ctx context.Context, seed uint32) error {
	typ, arg, _, err := c.request(ctx, msgWritten, seed, nil)
	if err != nil {
		return err
	}
	if typ != msgVerified || arg != seed+1 {
		return fmt.Errorf("answer %q %d, want %q %d", typ, arg, msgVerified, seed+1)
	}
	return nil
}

// send sends a message that has no answer and waits for its completion.
func (c *demoClient) send(ctx context.Context, typ byte) error {
	n := putMsg(c.outbox.Bytes(), typ, 0, nil)
	if err := c.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{c.outbox.SGE(0, n)}}); err != nil {
		return err
	}
	_, err := c.cq.WaitFor(ctx, conn.WCSend)
	return err
}
