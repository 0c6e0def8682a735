package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/internal/progress"
	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/stag"
)

// clientQP is the client's side of one session.
type clientQP struct {
	qp     *conn.QP
	w      *waiter.Waiter
	local  *conn.MR // Write and Send source, Read sink, target of the server's Writes; latency receives
	credit *conn.MR // receive slots for credit messages (Send streams)
	report *conn.MR // the receive of the server's report (Write and Read streams)
	remote conn.RemoteAddr
	setup  string
}

// slotLen is a credit receive's length: a credit message is 4 bytes, but
// the server's report at the end lands in one of these receives too.
const slotLen = reportLen

// A server that serves as many sessions as it may refuses more (Serve's
// MaxSessions); the client tries again for a while, because the sessions
// it has just closed may still be ending at the server, which frees their
// places only then.
const (
	busyWait  = 2 * time.Second
	busyPause = 20 * time.Millisecond
)

// openSession connects to a bench server for one phase of cfg, trying
// again while the server refuses it for serving too many sessions.
func openSession(ctx context.Context, cfg *Config, phase Phase, final bool) (*clientQP, error) {
	deadline := time.Now().Add(busyWait)
	for {
		c, err := dialSession(ctx, cfg, phase, final)
		if err == nil || !serverBusy(err) || time.Now().After(deadline) {
			return c, err
		}
		select {
		case <-time.After(busyPause):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// serverBusy reports whether the server refused a session for serving too
// many.
func serverBusy(err error) bool {
	var rej *mpa.RejectedError
	return errors.As(err, &rej) && bytes.HasPrefix(rej.PrivateData, []byte(busyReject))
}

// dialSession connects to a bench server for one phase of cfg.
func dialSession(ctx context.Context, cfg *Config, phase Phase, final bool) (*clientQP, error) {
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
	// Latency receives take the server's report too.
	localLen := cfg.Size
	if phase == PhaseLatency {
		localLen = max(cfg.Size, reportLen)
	}
	// The local buffer takes the server's Writes only in the Write
	// ping-pong. Elsewhere it is registered without RemoteWrite, as a
	// program registers a Write's or Send's source: with CRC, conn copies
	// a source that peers may write before it computes the CRC (the CRC
	// must cover the bytes sent), and that copy is not what a stream of
	// Writes from a private buffer costs.
	access := conn.LocalWrite
	if phase == PhaseLatency && s.Op == 'w' {
		access |= conn.RemoteWrite
	}
	if c.local, err = pd.Register(make([]byte, localLen), access); err != nil {
		return fail(err)
	}
	fill(c.local.Bytes())
	switch {
	case phase == PhaseBandwidth && s.Op == 's':
		if c.credit, err = pd.Register(make([]byte, slotLen*recvs), conn.LocalWrite); err != nil {
			return fail(err)
		}
		for i := 0; i < recvs; i++ {
			if err := c.postCreditRecv(i); err != nil {
				return fail(err)
			}
		}
	case phase == PhaseBandwidth:
		if c.report, err = pd.Register(make([]byte, reportLen), conn.LocalWrite); err != nil {
			return fail(err)
		}
		if err := qp.PostRecv(conn.RecvWR{SGL: []conn.SGE{c.report.SGE(0, reportLen)}}); err != nil {
			return fail(err)
		}
	default:
		for i := 0; i < recvs; i++ {
			if err := c.postRecv(); err != nil {
				return fail(err)
			}
		}
	}
	r := c.local.Remote(0)
	s.Region = Region{TO: r.TO, STag: uint32(r.STag), Len: s.Size}
	opts := append(append(ConnOptions(cfg.CRC), cfg.Options...), conn.WithPrivateData(AppendSession(nil, s)))
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
	return c.qp.PostRecv(conn.RecvWR{ID: uint64(slot), SGL: []conn.SGE{c.credit.SGE(slotLen*slot, slotLen)}})
}

func (c *clientQP) close() { c.qp.Close() }

// received returns the bytes a receive completion placed.
func (c *clientQP) received(wc *conn.WorkCompletion) []byte {
	switch {
	case c.credit != nil:
		return c.credit.Bytes()[slotLen*int(wc.ID):][:wc.ByteLen]
	case c.report != nil:
		return c.report.Bytes()[:wc.ByteLen]
	}
	return c.local.Bytes()[:wc.ByteLen]
}

// reportTimeout bounds the wait for a server's report.
const reportTimeout = 10 * time.Second

// fetchReport asks the server for its report, once the session's measured
// part is over, and waits for it.
func (c *clientQP) fetchReport(ctx context.Context) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := c.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Solicited}); err != nil {
		return Report{}, err
	}
	for {
		wcs, err := c.poll(ctx)
		if err != nil {
			return Report{}, fmt.Errorf("the server's report: %w", err)
		}
		for i := range wcs {
			if wcs[i].Op == conn.WCRecv && wcs[i].ByteLen == reportLen {
				return ParseReport(c.received(&wcs[i]))
			}
		}
	}
}

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
func (c *clientQP) streamRDMA(ctx context.Context, cfg *Config, start time.Time, prog *progress.Line) (phaseResult, error) {
	op, wcOp := conn.OpWrite, conn.WCRDMAWrite
	if cfg.Op == "read" {
		op, wcOp = conn.OpRead, conn.WCRDMARead
	}
	sgl := []conn.SGE{c.local.SGE(0, cfg.Size)}
	w := newWindow(cfg.Window)
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
func (c *clientQP) streamSend(ctx context.Context, cfg *Config, start time.Time, prog *progress.Line) (phaseResult, error) {
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
				if wc.ByteLen != 4 {
					return fmt.Errorf("a %d-byte credit message", wc.ByteLen)
				}
				credits += int64(binary.BigEndian.Uint32(c.received(&wc)))
				if err := c.postCreditRecv(int(wc.ID)); err != nil {
					return err
				}
			}
		}
		return nil
	}
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
//
// It also returns the CPU time this process spent per counted round trip
// (in a loopback run, that of both sides).
func (c *clientQP) pingPong(ctx context.Context, cfg *Config, prog *progress.Line) ([]time.Duration, *float64, error) {
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
	var cpu cpuClock
	start := time.Now()
	stop := cfg.latStopper(start)
	for i := int64(0); ; i++ {
		t := time.Now()
		counted := !cfg.warmingUp(i, start, t)
		if counted {
			t = cpu.begin(t)
		}
		if _, err := c.qp.PostSendBatch(wrs); err != nil {
			return nil, nil, err
		}
		if err := c.waitFor(ctx, want); err != nil {
			return nil, nil, err
		}
		d := time.Since(t)
		if want == conn.WCRecv {
			if err := c.postRecv(); err != nil {
				return nil, nil, err
			}
		}
		if counted {
			samples = append(samples, d)
			prog.Add(1)
		}
		if stop.last(i) {
			break
		}
	}
	return samples, cpu.perRoundTrip(len(samples)), nil
}

// rdmaResult is what the client's sessions of one run measured.
type rdmaResult struct {
	bw     phaseResult
	lat    []time.Duration
	latCPU *float64 // this process's CPU time per round trip
	// serverLatCPU is the server's, from its report: between processes
	// only (in a loopback run latCPU is both sides').
	serverLatCPU *float64
	setup        string
	crc          crcCount // both ends of every session of the run
}

// openParallel bounds the sessions a client sets up at once.
const openParallel = 16

// openSessions opens n sessions of a phase at once (at most openParallel
// setting up at a time). If final, the first is marked final: close it
// last (closeSessions).
func openSessions(ctx context.Context, cfg *Config, phase Phase, n int, final bool) ([]*clientQP, error) {
	cs := make([]*clientQP, n)
	errs := make([]error, n)
	slots := make(chan struct{}, openParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			cs[i], errs[i] = openSession(ctx, cfg, phase, final && i == 0)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeSessions(cs)
		return nil, err
	}
	return cs, nil
}

// closeSessions closes the sessions, the first (which may be the final
// one) last.
func closeSessions(cs []*clientQP) {
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i] != nil {
			cs[i].close()
		}
	}
}

// collect adds what both ends of a session received to the run's count,
// after fetching the server's report.
func (c *clientQP) collect(ctx context.Context, count *crcCount) (Report, error) {
	rep, err := c.fetchReport(ctx)
	if err != nil {
		return rep, err
	}
	count.addReport(rep)
	count.add(receivedBy(c.qp))
	return rep, nil
}

// rdmaBench runs the client's sessions: a bandwidth phase over cfg.QPs
// connections at once, then a latency phase on one, each phase on
// connections of its own.
func rdmaBench(ctx context.Context, cfg *Config) (res rdmaResult, err error) {
	latency := cfg.hasLatency()
	n := cfg.qps()
	cs, err := openSessions(ctx, cfg, PhaseBandwidth, n, cfg.lastRun && !latency)
	if err != nil {
		return res, fmt.Errorf("bandwidth session: %w", err)
	}
	res.setup = cs[0].setup
	prog := progress.Start(cfg.Progress, fmt.Sprintf("iwarp-go %s %s", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.Iters*n, cfg.Duration)
	res.bw, err = timedTogether(cfg.Loopback, n, func(i int, start time.Time) (phaseResult, error) {
		if cfg.Op == "send" {
			return cs[i].streamSend(ctx, cfg, start, prog)
		}
		return cs[i].streamRDMA(ctx, cfg, start, prog)
	})
	prog.Finish()
	if err == nil {
		for _, c := range cs {
			if _, err = c.collect(ctx, &res.crc); err != nil {
				break
			}
		}
	}
	closeSessions(cs)
	if err != nil {
		return res, fmt.Errorf("%s stream: %w", cfg.Op, err)
	}
	if !latency {
		return res, nil
	}
	c, err := openSession(ctx, cfg, PhaseLatency, cfg.lastRun)
	if err != nil {
		return res, fmt.Errorf("latency session: %w", err)
	}
	defer c.close()
	prog = progress.Start(cfg.Progress, fmt.Sprintf("iwarp-go %s %s latency", cfg.Op, units.Bytes(int64(cfg.Size))), cfg.LatIters, cfg.latDuration())
	res.lat, res.latCPU, err = c.pingPong(ctx, cfg, prog)
	prog.Finish()
	if err != nil {
		return res, fmt.Errorf("%s ping-pong: %w", cfg.Op, err)
	}
	rep, err := c.collect(ctx, &res.crc)
	if err != nil {
		return res, fmt.Errorf("%s ping-pong: %w", cfg.Op, err)
	}
	if !cfg.Loopback {
		res.serverLatCPU = perRoundTrip(rep.CPU, rep.CPUKnown, rep.RoundTrips)
	}
	return res, nil
}
