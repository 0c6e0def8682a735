package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
	"github.com/iwarp-go/iwarp-go/stag"
)

// ServeConfig is how a server runs.
type ServeConfig struct {
	// Once ends the server after the first client whose run completed:
	// its last session (the one it marks final) ended with the client
	// closing the connection. A client that fails, during connection setup
	// or after, does not count. Without Once the server runs until its
	// context ends.
	Once bool
	// Log receives one line per refused or failed session.
	Log io.Writer
	// MaxSessions bounds the sessions served at once; more are refused.
	// 0 means DefaultMaxSessions.
	MaxSessions int
}

// busyReject starts the private data of the reject of a session beyond
// MaxSessions.
const busyReject = "too many sessions"

// DefaultMaxSessions is ServeConfig.MaxSessions' default. A client runs
// one session at a time; the rest of the room is for clients that do
// not end theirs.
const DefaultMaxSessions = 32

// Serve answers bench sessions on ln until ctx ends (or, with cfg.Once,
// until its first client's run is over) and returns nil then. Each session
// is served on its own: one that is refused, cut short or broken by its
// client is logged and ends nothing but itself. Serve returns an error
// only when the listener fails.
func Serve(ctx context.Context, ln *conn.Listener, cfg ServeConfig) error {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, cfg.MaxSessions)
	var mu sync.Mutex // serialises the log
	logf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(cfg.Log, "bench server: "+format+"\n", a...)
	}
	for {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s, err := ParseSession(req.PrivateData())
		if err != nil {
			req.Reject(ctx, []byte(err.Error()))
			logf("refused %v: %v", req.RemoteAddr(), err)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			req.Reject(ctx, fmt.Appendf(nil, "%s: the server serves %d at once", busyReject, cfg.MaxSessions))
			logf("refused %v: %d sessions in progress", req.RemoteAddr(), cfg.MaxSessions)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			err := serveSession(ctx, req, s)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				logf("session %c/%c from %v: %v", s.Phase, s.Op, req.RemoteAddr(), err)
			case cfg.Once && s.Final:
				cancel()
			}
		}()
	}
}

// serverQP is the server's side of one session.
type serverQP struct {
	qp     *conn.QP
	w      *waiter.Waiter
	region *conn.MR
	report *conn.MR // the report's source
	cpu    cpuMeter // from the session's first message
	timing bool     // cpu runs
	rts    uint64   // latency messages answered
}

// serveSession accepts the session's connection and answers it until the
// client closes.
func serveSession(ctx context.Context, req *conn.ConnRequest, s Session) (err error) {
	recvs := 4
	if s.Op == 's' && s.Phase == PhaseBandwidth {
		recvs = int(s.Credits)
	}
	// Room for the report beside what the session keeps in flight.
	sendDepth := max(recvs, 16) + 1
	pd := conn.NewPD()
	cq := conn.NewCQ(2 * (recvs + sendDepth))
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: sendDepth, RecvDepth: recvs})
	if err != nil {
		req.Reject(ctx, nil)
		return err
	}
	defer func() {
		// A session that failed, or a server that stops, does not wait
		// for the client to take a graceful close.
		if err != nil || ctx.Err() != nil {
			qp.Abort()
		} else {
			qp.Close()
		}
	}()
	b := &serverQP{qp: qp, w: waiter.New(cq, qp)}
	b.region, err = pd.Register(make([]byte, s.Size), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	if err == nil {
		b.report, err = pd.Register(make([]byte, reportLen), 0)
	}
	if err != nil {
		req.Reject(ctx, nil)
		return err
	}
	// Every receive of a session shares one buffer: the data is not
	// looked at, and the stack places one message at a time.
	for i := 0; i < recvs; i++ {
		if err := qp.PostRecv(conn.RecvWR{SGL: []conn.SGE{b.region.SGE(0, int(s.Size))}}); err != nil {
			req.Reject(ctx, nil)
			return err
		}
	}
	r := b.region.Remote(0)
	adv := Region{TO: r.TO, STag: uint32(r.STag), Len: s.Size}
	if err := req.Accept(ctx, qp, conn.WithPrivateData(AppendReply(nil, adv))); err != nil {
		return fmt.Errorf("connection setup: %w", err)
	}
	switch {
	case s.Phase == PhaseBandwidth && s.Op == 's':
		err = b.returnCredits(ctx, s)
	case s.Phase == PhaseLatency && s.Op != 'r':
		err = b.echo(ctx, s)
	default:
		// RDMA Write and Read need nothing from this side's program
		// but the report.
		b.startCPU()
		err = b.reportOnly(ctx)
	}
	return b.outcome(ctx, err)
}

func (b *serverQP) startCPU() {
	if !b.timing {
		b.cpu, b.timing = startCPU(), true
	}
}

// sendReport answers the client's request for a report: what this end
// received, and the CPU time since the session's first message.
func (b *serverQP) sendReport() error {
	rx := receivedBy(b.qp)
	r := Report{CRC: rx.crc, FPDUs: rx.fpdus, CRCErrors: rx.crcErrors, RoundTrips: b.rts}
	if b.timing {
		r.CPU, r.CPUKnown = b.cpu.elapsed()
	}
	copy(b.report.Bytes(), AppendReport(nil, r))
	// Unsignalled: nothing waits for its completion.
	return b.qp.PostSend(conn.SendWR{Op: conn.OpSend, SGL: []conn.SGE{b.report.SGE(0, reportLen)}})
}

// reportOnly serves a Write or Read stream: it answers the report
// request, then waits for the client to close.
func (b *serverQP) reportOnly(ctx context.Context) error {
	for {
		wcs, err := b.poll(ctx)
		if err != nil {
			return err
		}
		for i := range wcs {
			if isReportRequest(&wcs[i]) {
				if err := b.sendReport(); err != nil {
					return err
				}
			}
		}
	}
}

// outcome turns the error a session ended with into its result: the
// client closing the connection is the normal end; any other end of the
// connection is the session's failure.
func (b *serverQP) outcome(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return nil
	case waiter.Ended(err):
		if cause := b.qp.Err(); !errors.Is(cause, conn.ErrPeerClosed) {
			return cause
		}
		return nil
	}
	return err
}

// poll returns completions, waiting for at least one.
func (b *serverQP) poll(ctx context.Context) ([]conn.WorkCompletion, error) {
	return b.w.Poll(ctx)
}

// returnCredits is the receiver of a Send stream: it reposts each
// receive as its Send arrives and tells the sender how many receives it
// freed, every s.batch Sends and whenever a Send asks for an answer with
// the Solicited Event flag (the sender does so when it runs out).
func (b *serverQP) returnCredits(ctx context.Context, s Session) error {
	// Each credit message frees at least one credit, so no more than
	// s.credits of them are ever in flight: a slot per credit, and a send
	// queue as deep (serveSession sizes it).
	ring := int(s.Credits)
	credMR, err := b.qp.PD().Register(make([]byte, 4*ring), 0)
	if err != nil {
		return err
	}
	rsgl := []conn.SGE{b.region.SGE(0, int(s.Size))}
	pending, posted, done := 0, 0, 0
	for {
		wcs, err := b.poll(ctx)
		if err != nil {
			return err
		}
		solicited := false
		for i := range wcs {
			wc := &wcs[i]
			switch {
			case isReportRequest(wc):
				if err := b.sendReport(); err != nil {
					return err
				}
			case wc.Op == conn.WCRecv:
				b.startCPU()
				if err := b.qp.PostRecv(conn.RecvWR{SGL: rsgl}); err != nil {
					return err
				}
				pending++
				solicited = solicited || wc.Flags&conn.WCSolicited != 0
			case wc.Op == conn.WCSend:
				done++
			}
		}
		if pending == 0 || (pending < int(s.Batch) && !solicited) {
			continue
		}
		for posted-done >= ring {
			wcs, err := b.poll(ctx)
			if err != nil {
				return err
			}
			for _, wc := range wcs {
				if wc.Op == conn.WCSend {
					done++
				}
			}
		}
		slot := posted % ring
		binary.BigEndian.PutUint32(credMR.Bytes()[4*slot:], uint32(pending))
		if err := b.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{credMR.SGE(4*slot, 4)}}); err != nil {
			return err
		}
		posted++
		pending = 0
	}
}

// echo answers each message of a latency session: a Send with a Send of
// the same size, a Write (announced by a zero-length Send) with a Write
// into the client's region and a zero-length Send.
func (b *serverQP) echo(ctx context.Context, s Session) error {
	rsgl := []conn.SGE{b.region.SGE(0, int(s.Size))}
	answer := []conn.SendWR{{Op: conn.OpSend, SGL: rsgl}}
	if s.Op == 'w' {
		answer = []conn.SendWR{
			{Op: conn.OpWrite, SGL: rsgl, Remote: conn.RemoteAddr{STag: stag.STag(s.Region.STag), TO: s.Region.TO}},
			{Op: conn.OpSend},
		}
	}
	for {
		wcs, err := b.poll(ctx)
		if err != nil {
			return err
		}
		for i := range wcs {
			wc := &wcs[i]
			switch {
			case wc.Op != conn.WCRecv:
				continue
			case isReportRequest(wc):
				if err := b.sendReport(); err != nil {
					return err
				}
				continue
			}
			b.startCPU()
			if err := b.qp.PostRecv(conn.RecvWR{SGL: rsgl}); err != nil {
				return err
			}
			// Unsignalled: a send-queue slot frees itself when its
			// message is out.
			if _, err := b.qp.PostSendBatch(answer); err != nil {
				return err
			}
			b.rts++
		}
	}
}
