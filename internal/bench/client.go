package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/internal/progress"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
	"github.com/iwarp-go/iwarp-go/stag"
)

// clientQP is the client's side of one session.
type clientQP struct {
	qp     *conn.QP
	w      *waiter.Waiter
	local  *conn.MR // Write and Send source, Read sink, target of the server's Writes
	credit *conn.MR // receive slots for credit messages (Send streams)
	remote conn.RemoteAddr
	setup  string
}

// openSession connects to a bench server for one phase of cfg.
func openSession(ctx context.Context, cfg *Config, phase Phase, final bool) (*clientQP, error) {
	s := Session{Phase: phase, Op: cfg.Op[0], Final: final, Size: uint32(cfg.Size), Window: uint32(cfg.Window)}
	recvs := 4 // latency: answers
	if phase == PhaseBandwidth {
		recvs = 1
		if s.Op == 's' {
			s.Credits, s.Batch = cfg.credits(), cfg.creditBatch()
			recvs = int(s.Credits) // one credit message per credit at most
		}
	}
	sendDepth := cfg.Window + 16
	pd := conn.NewPD()
	cq := conn.NewCQ(2*(recvs+sendDepth) + 16)
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: sendDepth, RecvDepth: recvs})
	if err != nil {
		return nil, err
	}
	c := &clientQP{qp: qp, w: waiter.New(cq, qp)}
	fail := func(err error) (*clientQP, error) {
		qp.Close()
		return nil, err
	}
	if c.local, err = pd.Register(make([]byte, cfg.Size), conn.LocalWrite|conn.RemoteWrite); err != nil {
		return fail(err)
	}
	fill(c.local.Bytes())
	if phase == PhaseBandwidth && s.Op == 's' {
		if c.credit, err = pd.Register(make([]byte, 4*recvs), conn.LocalWrite); err != nil {
			return fail(err)
		}
		for i := 0; i < recvs; i++ {
			if err := c.postCreditRecv(i); err != nil {
				return fail(err)
			}
		}
	} else if phase == PhaseLatency {
		for i := 0; i < recvs; i++ {
			if err := c.postRecv(); err != nil {
				return fail(err)
			}
		}
	}
	r := c.local.Remote(0)
	s.Region = Region{TO: r.TO, STag: uint32(r.STag), Len: s.Size}
	opts := append(ConnOptions(cfg.CRC), conn.WithPrivateData(AppendSession(nil, s)))
	if err := qp.Connect(ctx, "tcp", cfg.Target, opts...); err != nil {
		return fail(err)
	}
	res := qp.Negotiated()
	adv, err := ParseReply(res.PeerPrivateData)
	if err != nil {
		return fail(err)
	}
	if adv.Len < s.Size {
		return fail(fmt.Errorf("the server's region has %d bytes, %d needed", adv.Len, s.Size))
	}
	c.remote = conn.RemoteAddr{STag: stag.STag(adv.STag), TO: adv.TO}
	c.setup = negotiated.Describe(res)
	return c, nil
}

func (c *clientQP) postRecv() error {
	return c.qp.PostRecv(conn.RecvWR{SGL: []conn.SGE{c.local.SGE(0, c.local.Len())}})
}

func (c *clientQP) postCreditRecv(slot int) error {
	return c.qp.PostRecv(conn.RecvWR{ID: uint64(slot), SGL: []conn.SGE{c.credit.SGE(4*slot, 4)}})
}

func (c *clientQP) close() { c.qp.Close() }

// poll returns at least one completion; any unsuccessful one is an error.
func (c *clientQP) poll(ctx context.Context) ([]conn.WorkCompletion, error) {
	return c.w.Poll(ctx)
}

// window keeps at most cfg.Window work requests in flight, signalling
// every `every`-th: completions arrive in order, so each signalled one
// accounts for the requests up to it.
type window struct {
	size, every int64
	posted      int64
	acked       int64
}

func newWindow(size int) window {
	return window{size: int64(size), every: int64(max(1, size/4))}
}

func (w *window) flags(last bool) conn.SendFlags {
	if w.posted%w.every == w.every-1 || last {
		return conn.Signaled
	}
	return 0
}

func (w *window) full() bool { return w.posted-w.acked >= w.size }

func (w *window) ack() { w.acked = min(w.acked+w.every, w.posted) }

// streamRDMA measures a stream of RDMA Writes or Reads of the whole
// region. A Write stream ends with a small Read behind it: RDMAP returns
// the Read Response only after the earlier Writes are placed, so the time
// covers their arrival in the server's memory, not only their sending.
func (c *clientQP) streamRDMA(ctx context.Context, cfg *Config, prog *progress.Line) (phaseResult, error) {
	op, wcOp := conn.OpWrite, conn.WCRDMAWrite
	if cfg.Op == "read" {
		op, wcOp = conn.OpRead, conn.WCRDMARead
	}
	sgl := []conn.SGE{c.local.SGE(0, cfg.Size)}
	w := newWindow(cfg.Window)
	start := time.Now()
	stop := newStopper(cfg, start)
	for last := false; !last; {
		for w.full() {
			if err := c.reap(ctx, &w, wcOp); err != nil {
				return phaseResult{}, err
			}
		}
		last = stop.last(w.posted)
		if err := c.qp.PostSend(conn.SendWR{Op: op, Flags: w.flags(last), SGL: sgl, Remote: c.remote}); err != nil {
			return phaseResult{}, err
		}
		w.posted++
		prog.Add(1)
	}
	for w.acked < w.posted {
		if err := c.reap(ctx, &w, wcOp); err != nil {
			return phaseResult{}, err
		}
	}
	if op == conn.OpWrite {
		fence := conn.SendWR{Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{c.local.SGE(0, 1)}, Remote: c.remote}
		if err := c.qp.PostSend(fence); err != nil {
			return phaseResult{}, err
		}
		if err := c.waitFor(ctx, conn.WCRDMARead); err != nil {
			return phaseResult{}, err
		}
	}
	elapsed := time.Since(start)
	return phaseResult{messages: w.posted, bytes: w.posted * int64(cfg.Size), elapsed: elapsed}, nil
}

// reap waits for completions and acknowledges the window for each of
// kind op.
func (c *clientQP) reap(ctx context.Context, w *window, op conn.WCOpcode) error {
	wcs, err := c.poll(ctx)
	if err != nil {
		return err
	}
	for _, wc := range wcs {
		if wc.Op == op {
			w.ack()
		}
	}
	return nil
}

func (c *clientQP) waitFor(ctx context.Context, op conn.WCOpcode) error {
	for {
		wcs, err := c.poll(ctx)
		if err != nil {
			return err
		}
		for _, wc := range wcs {
			if wc.Op == op {
				return nil
			}
		}
	}
}

// streamSend measures a stream of Sends under the credit scheme a real
// application needs (a Send without a posted receive is fatal in iWARP):
// the sender starts with as many credits as the receiver posted receives,
// spends one per Send and gets them back in credit messages, which the
// receiver sends every batch of Sends and at once for a Send carrying the
// Solicited Event flag. The sender sets that flag when it spends its last
// credit and on its last Send, so neither side ever waits for a batch to
// fill. The run ends when every credit is back, that is when the receiver
// has taken every Send.
func (c *clientQP) streamSend(ctx context.Context, cfg *Config, prog *progress.Line) (phaseResult, error) {
	total := int64(cfg.credits())
	credits := total
	sgl := []conn.SGE{c.local.SGE(0, cfg.Size)}
	w := newWindow(cfg.Window)
	handle := func() error {
		wcs, err := c.poll(ctx)
		if err != nil {
			return err
		}
		for _, wc := range wcs {
			switch wc.Op {
			case conn.WCSend:
				w.ack()
			case conn.WCRecv:
				slot := int(wc.ID)
				credits += int64(binary.BigEndian.Uint32(c.credit.Bytes()[4*slot:]))
				if err := c.postCreditRecv(slot); err != nil {
					return err
				}
			}
		}
		return nil
	}
	start := time.Now()
	stop := newStopper(cfg, start)
	for last := false; !last; {
		for credits == 0 || w.full() {
			if err := handle(); err != nil {
				return phaseResult{}, err
			}
		}
		last = stop.last(w.posted)
		flags := w.flags(last)
		if credits == 1 || last {
			flags |= conn.Solicited
		}
		if err := c.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: flags, SGL: sgl}); err != nil {
			return phaseResult{}, err
		}
		credits--
		w.posted++
		prog.Add(1)
	}
	for credits < total || w.acked < w.posted {
		if err := handle(); err != nil {
			return phaseResult{}, err
		}
	}
	if credits != total {
		return phaseResult{}, fmt.Errorf("credits: %d returned, %d given", credits, total)
	}
	elapsed := time.Since(start)
	return phaseResult{messages: w.posted, bytes: w.posted * int64(cfg.Size), elapsed: elapsed}, nil
}

// pingPong measures round trips one at a time: a Send answered by a Send
// of the same size; a Write followed by a zero-length Send that announces
// it, answered the same way (iWARP has no Write with Immediate toward
// siw); or one RDMA Read, which is a round trip by itself.
func (c *clientQP) pingPong(ctx context.Context, cfg *Config, prog *progress.Line) ([]time.Duration, error) {
	sgl := []conn.SGE{c.local.SGE(0, cfg.Size)}
	var wrs []conn.SendWR
	want := conn.WCRecv
	switch cfg.Op {
	case "send":
		wrs = []conn.SendWR{{Op: conn.OpSend, SGL: sgl}}
	case "write":
		wrs = []conn.SendWR{{Op: conn.OpWrite, SGL: sgl, Remote: c.remote}, {Op: conn.OpSend}}
	case "read":
		wrs = []conn.SendWR{{Op: conn.OpRead, Flags: conn.Signaled, SGL: sgl, Remote: c.remote}}
		want = conn.WCRDMARead
	}
	samples := make([]time.Duration, 0, cfg.latSamplesHint())
	start := time.Now()
	stop := cfg.latStopper(start)
	for i := int64(0); ; i++ {
		t := time.Now()
		if _, err := c.qp.PostSendBatch(wrs); err != nil {
			return nil, err
		}
		if err := c.waitFor(ctx, want); err != nil {
			return nil, err
		}
		d := time.Since(t)
		if want == conn.WCRecv {
			if err := c.postRecv(); err != nil {
				return nil, err
			}
		}
		if !cfg.warmingUp(i, start, t) {
			samples = append(samples, d)
			prog.Add(1)
		}
		if stop.last(i) {
			break
		}
	}
	return samples, nil
}

// rdmaBench runs the client's sessions: a bandwidth phase, then a latency
// phase, each on its own connection.
func rdmaBench(ctx context.Context, cfg *Config) (bw phaseResult, lat []time.Duration, setup string, err error) {
	latency := cfg.hasLatency()
	c, err := openSession(ctx, cfg, PhaseBandwidth, cfg.lastRun && !latency)
	if err != nil {
		return bw, nil, "", fmt.Errorf("bandwidth session: %w", err)
	}
	setup = c.setup
	prog := progress.Start(cfg.Progress, fmt.Sprintf("iwarp-go %s %s", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.Iters, cfg.Duration)
	if cfg.Op == "send" {
		bw, err = c.streamSend(ctx, cfg, prog)
	} else {
		bw, err = c.streamRDMA(ctx, cfg, prog)
	}
	prog.Finish()
	c.close()
	if err != nil {
		return bw, nil, setup, fmt.Errorf("%s stream: %w", cfg.Op, err)
	}
	if !latency {
		return bw, nil, setup, nil
	}
	if c, err = openSession(ctx, cfg, PhaseLatency, cfg.lastRun); err != nil {
		return bw, nil, setup, fmt.Errorf("latency session: %w", err)
	}
	prog = progress.Start(cfg.Progress, fmt.Sprintf("iwarp-go %s %s latency", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.LatIters, cfg.latDuration())
	lat, err = c.pingPong(ctx, cfg, prog)
	prog.Finish()
	c.close()
	if err != nil {
		return bw, nil, setup, fmt.Errorf("%s ping-pong: %w", cfg.Op, err)
	}
	return bw, lat, setup, nil
}
