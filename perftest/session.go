package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Result is one row of a run's result table.
type Result struct {
	// BW is set for bandwidth tests. A write_bw or read_bw server prints
	// (and returns) the client's report, as perftest's does.
	BW *BWReport
	// Lat is set for latency tests.
	Lat *LatReport
}

// Iters returns the row's message count.
func (r Result) Iters() uint64 {
	if r.BW != nil {
		return r.BW.Iters
	}
	if r.Lat != nil {
		return r.Lat.Iters
	}
	return 0
}

// Size returns the row's message size.
func (r Result) Size() uint64 {
	if r.BW != nil {
		return r.BW.Size
	}
	if r.Lat != nil {
		return r.Lat.Size
	}
	return 0
}

// Acceptor hands out connection requests; *conn.Listener is one.
type Acceptor interface {
	AcceptRequest(ctx context.Context) (*conn.ConnRequest, error)
}

// session is one run of one side.
type session struct {
	s     *settings
	role  Role
	pd    *conn.PD
	out   io.Writer
	proto *Protocol
	comm  *comm

	// client
	addr string
	// server
	src      Acceptor
	peerHost string
	peerIsGo bool // the client is iwarp-go (its MPA Request says so)

	qps      []*conn.QP
	scq, rcq *conn.CQ
	bufs     testBuffers
	results  []Result
	printed  bool
}

// Dial runs cfg.Test as perftest's client (the side given an address)
// against the perftest server at addr ("host:port"). Memory is registered
// and queue pairs are created in pd. It returns the rows of the result
// table this side prints.
func Dial(ctx context.Context, addr string, pd *conn.PD, cfg Config) ([]Result, error) {
	s, err := newSession(Client, pd, cfg)
	if err != nil {
		return nil, err
	}
	s.addr = addr
	return s.run(ctx)
}

// Serve runs cfg.Test as perftest's server for one client: the first
// request from src opens the comm connection, and the client's test
// connections follow on src (from the same host; requests from other
// hosts are rejected meanwhile). Memory is registered and queue pairs are
// created in pd. It returns the rows of the result table this side prints
// (a write_bw or read_bw server prints the client's report; a read_lat
// server prints none).
func Serve(ctx context.Context, src Acceptor, pd *conn.PD, cfg Config) ([]Result, error) {
	s, err := newSession(Server, pd, cfg)
	if err != nil {
		return nil, err
	}
	s.src = src
	return s.run(ctx)
}

func newSession(role Role, pd *conn.PD, cfg Config) (*session, error) {
	if pd == nil {
		return nil, fmt.Errorf("%w: nil protection domain", ErrConfig)
	}
	st, err := cfg.settings(role)
	if err != nil {
		return nil, err
	}
	proto, err := NewProtocol(st.params(role))
	if err != nil {
		return nil, err
	}
	out := cfg.Output
	if out == nil {
		out = io.Discard
	}
	return &session{s: st, role: role, pd: pd, out: out, proto: proto}, nil
}

func (s *session) run(ctx context.Context) (res []Result, err error) {
	defer func() { s.teardown(err != nil) }()
	if s.role == Server {
		writeWaiting(s.out)
	}
	if err := s.openComm(ctx); err != nil {
		return nil, err
	}
	for {
		st := s.proto.Next()
		if st.PeerDestsKnown && !s.printed {
			s.printTableHead()
		}
		switch st.Kind {
		case StepExchange:
			in, err := s.comm.exchange(ctx, st.What, st.Msg)
			if err != nil {
				return s.results, err
			}
			if err := s.proto.Reply(in); err != nil {
				return s.results, err
			}
			continue
		case StepConnect:
			err = s.connect(ctx, st.QPs)
			if err == nil {
				writeInfo(s.out, s.s.header(s.role, s.proto.MTU()))
			}
		case StepPostRecv:
			err = s.postRecvs(st.Size)
		case StepRun:
			err = s.measure(ctx, st.Size)
		case StepEnd:
			if s.role == Server && (s.s.Test == WriteBW || s.s.Test == ReadBW || s.s.Test == AtomicBW) {
				r := s.proto.PeerReport()
				s.results = append(s.results, Result{BW: &r})
				writeBWRow(s.out, &r, s.s.ReportGbits)
			}
			io.WriteString(s.out, resultLine)
			return s.results, nil
		}
		if err != nil {
			return s.results, err
		}
		if err := s.proto.Done(); err != nil {
			return s.results, err
		}
	}
}

// printTableHead prints both sides' queue pair lines and the column names.
func (s *session) printTableHead() {
	s.printed = true
	for i := range s.qps {
		d := s.proto.my[i]
		writeDest(s.out, "local", &d)
	}
	for i := range s.qps {
		d := s.proto.PeerDest(i)
		writeDest(s.out, "remote", &d)
	}
	if (s.s.Test == ReadLat || s.s.Test == AtomicLat) && s.role == Server {
		return // the read_lat and atomic_lat servers measure nothing
	}
	writeResultHeader(s.out, s.s.Test, s.s.Duration > 0, s.s.ReportGbits)
}

// connOptions are the setup options of every connection of the run.
func (s *session) connOptions(test bool) []conn.Option {
	opts := append([]conn.Option(nil), s.s.ConnOptions...)
	if test && s.s.Test.verb().oneSidedRead() {
		// perftest's Read tests ask rdma_cm for out_reads (the device's
		// maximum) Reads in flight both ways.
		opts = append(opts, conn.WithIRDORD(s.s.outReads, s.s.outReads))
	}
	return opts
}

func (s *session) openComm(ctx context.Context) error {
	c, err := newComm(s.pd, s.role)
	if err != nil {
		return err
	}
	s.comm = c
	if s.role == Client {
		if err := c.qp.Connect(ctx, "tcp", s.addr, s.connOptions(false)...); err != nil {
			return fmt.Errorf("perftest: connecting to %s: %w", s.addr, err)
		}
		return nil
	}
	req, err := s.src.AcceptRequest(ctx)
	if err != nil {
		return fmt.Errorf("perftest: waiting for a client: %w", err)
	}
	s.peerHost = hostOf(req.RemoteAddr())
	s.peerIsGo = req.PeerIsIwarpGo()
	if err := req.Accept(ctx, c.qp, s.connOptions(false)...); err != nil {
		return fmt.Errorf("perftest: accepting the client's comm connection: %w", err)
	}
	return nil
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h
}

// Test connections: the client retries its connects, since a perftest
// server listens for them only after the handshake that precedes them
// (perftest's client tries ten times, 100 ms apart).
const (
	connectRetry   = 100 * time.Millisecond
	connectPatient = 20 * time.Second
)

func (s *session) connect(ctx context.Context, n int) error {
	sendDepth, recvDepth := s.s.txDepth, 1
	if s.s.Test.verb() == verbSend {
		recvDepth = s.s.rxDepth
	}
	if s.s.Test == SendBW {
		sendDepth += s.s.txDepth // the receiver's credit Writes
	}
	s.scq = conn.NewCQ(n * sendDepth)
	s.rcq = conn.NewCQ(n * recvDepth)
	caps := conn.QPCaps{SendDepth: sendDepth, RecvDepth: recvDepth, MaxSendSGE: 1, MaxRecvSGE: 1, RecvCQ: s.rcq}
	opts := s.connOptions(true)
	if s.role == Server && s.s.Test == WriteLat {
		// write_lat's server sends the first message on the test
		// connection, and an initiator that uses no peer-to-peer mode
		// (siw) sends nothing before it: the responder must not wait for
		// an FPDU from it. Well after the MPA exchange, as here, a Write
		// is safe for siw. A deliberate deviation from RFC 5044 §7.1.2
		// rule 4, for this connection only.
		opts = append(opts, conn.WithResponderSendFirst(conn.DefaultFirstFPDUDelay))
	}
	for range n {
		qp, err := s.pd.NewQP(s.scq, caps)
		if err != nil {
			return err
		}
		if s.role == Client {
			err = s.dialTest(ctx, &qp, caps, opts)
		} else {
			err = s.acceptTest(ctx, qp, opts)
		}
		s.qps = append(s.qps, qp)
		if err != nil {
			return err
		}
	}
	if s.role == Client && !s.qps[0].PeerIsIwarpGo() {
		// iwarp-go holds an initiator's first FPDU back toward peers that
		// may be siw; let the hold pass before anything is timed.
		time.Sleep(conn.DefaultFirstFPDUDelay)
	}
	if err := s.setupBuffers(); err != nil {
		return err
	}
	for i := range s.qps {
		s.proto.SetDest(i, s.bufs.dest(i, s.qps[i], s.s))
	}
	return nil
}

func (s *session) dialTest(ctx context.Context, qp **conn.QP, caps conn.QPCaps, opts []conn.Option) error {
	deadline := time.Now().Add(connectPatient)
	for {
		err := (*qp).Connect(ctx, "tcp", s.addr, opts...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("perftest: test connection to %s: %w", s.addr, err)
		}
		select {
		case <-time.After(connectRetry):
		case <-s.comm.qp.Done():
			// The server has gone: no test connection will be accepted.
			return fmt.Errorf("perftest: test connection to %s: %w (and the comm connection has closed: %v)", s.addr, err, s.comm.qp.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
		// A queue pair whose setup failed is unusable; take a new one.
		nq, nerr := s.pd.NewQP(s.scq, caps)
		if nerr != nil {
			return nerr
		}
		*qp = nq
	}
}

func (s *session) acceptTest(ctx context.Context, qp *conn.QP, opts []conn.Option) error {
	// A client whose comm connection has gone will not connect.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.comm.qp.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		req, err := s.src.AcceptRequest(ctx)
		if err != nil {
			if e := s.comm.qp.Err(); e != nil && ctx.Err() != nil {
				err = fmt.Errorf("the comm connection closed: %w", e)
			}
			return fmt.Errorf("perftest: waiting for the test connection: %w", err)
		}
		if h := hostOf(req.RemoteAddr()); h != s.peerHost {
			// Another client while this one runs: perftest's server does
			// not listen then; refuse it.
			req.Reject(ctx, nil)
			continue
		}
		if err := req.Accept(ctx, qp, opts...); err != nil {
			return fmt.Errorf("perftest: accepting the test connection: %w", err)
		}
		return nil
	}
}

// closeLinger bounds how long a finished run waits for the peer to close
// its connections first.
const closeLinger = 2 * time.Second

// teardown closes the test connections, then the comm connection. After a
// run that ended well it first lets the peer close them (at most
// closeLinger): siw may still be completing its last Send or Write when
// the message has already arrived here, and a connection closed at that
// moment fails the work request (IBV_WC_LOC_QP_OP_ERR) and the perftest
// program with it. Between two iwarp-go sides both close at once.
func (s *session) teardown(failed bool) {
	peerIsGo := s.peerIsGo || (s.comm != nil && s.comm.qp.PeerIsIwarpGo())
	if !failed && !peerIsGo {
		timer := time.NewTimer(closeLinger)
		qps := s.qps
		if s.comm != nil {
			qps = append(qps[:len(qps):len(qps)], s.comm.qp)
		}
	wait:
		for _, qp := range qps {
			select {
			case <-qp.Done():
			case <-timer.C:
				break wait
			}
		}
		timer.Stop()
	}
	for _, qp := range s.qps {
		if failed {
			qp.Abort()
		} else {
			qp.Close()
		}
	}
	if s.comm != nil {
		if failed {
			s.comm.qp.Abort()
		}
		s.comm.close()
	}
	s.bufs.release()
}

// psn is a random 24-bit packet sequence number, printed only.
func psn() uint32 { return rand.Uint32() & 0xffffff }

// qpFailed turns a queue pair's end into the error a run reports.
func qpFailed(qp *conn.QP, what string) error {
	err := qp.Err()
	if err == nil {
		err = errors.New("connection closed")
	}
	return fmt.Errorf("%w: %s: %w", ErrTest, what, err)
}
