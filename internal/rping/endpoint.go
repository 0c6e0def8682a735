package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/iwarp-go/iwarp-go/conn"
)

func init() {
	register("rping", command{
		summary: "rping-compatible client and server (rdma-core's rping over siw)",
		run:     runRping,
	})
}

// rpingConfig holds rping's command line. The one-letter flags and their
// meanings are rping's; the long ones select MPA variants for interop tests.
type rpingConfig struct {
	server, client bool
	addr, src      string
	port           int
	count, size    int
	persistent     bool
	verbose        bool
	validate       bool
	debug          bool
	mpa            mpaFlags
	opts           []conn.Option
}

func runRping(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return rping(ctx, args, stdout, stderr, nil)
}

func rpingUsage(w io.Writer) {
	fmt.Fprintln(w, "iwarp-peer rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]")
	fmt.Fprintln(w, "iwarp-peer rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]")
	fmt.Fprintln(w, "\t-c\t\tclient side")
	fmt.Fprintln(w, "\t-I\t\tSource address to bind to for client.")
	fmt.Fprintln(w, "\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0")
	fmt.Fprintln(w, "\t-v\t\tdisplay ping data to stdout")
	fmt.Fprintln(w, "\t-V\t\tvalidate ping data")
	fmt.Fprintln(w, "\t-d\t\tdebug printfs")
	fmt.Fprintln(w, "\t-S size \tping data size")
	fmt.Fprintln(w, "\t-C count\tping count times")
	fmt.Fprintln(w, "\t-a addr\t\taddress")
	fmt.Fprintln(w, "\t-p port\t\tport")
	fmt.Fprintln(w, "\t-P\t\tpersistent server mode allowing multiple connections")
	fmt.Fprintln(w, "\t-q\t\taccepted and ignored (the queue pair is always the program's own)")
	fmt.Fprintln(w, "interop options:")
	fmt.Fprintln(w, "\t--crc off|preferred|required\tMPA CRC (default off: like siw, a server follows the client)")
	fmt.Fprintln(w, "\t--mpa-rev 1|2\t\t\tMPA revision (client: sent; server: the only one accepted)")
	fmt.Fprintln(w, "\t--no-enhanced\t\t\trevision 2 without the RFC 6581 Enhanced flag")
	fmt.Fprintln(w, "\t--p2p none|write|read|send\tRTR types offered (client, default none) or accepted (server, default all)")
}

func newRpingFlagSet(cfg *rpingConfig, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { rpingUsage(stderr) }
	fs.BoolVar(&cfg.server, "s", false, "server side")
	fs.BoolVar(&cfg.client, "c", false, "client side")
	fs.StringVar(&cfg.addr, "a", "", "address")
	fs.StringVar(&cfg.src, "I", "", "source address to bind to for the client")
	fs.IntVar(&cfg.port, "p", rpingPort, "port")
	fs.IntVar(&cfg.count, "C", 0, "ping count times (0: until interrupted)")
	fs.IntVar(&cfg.size, "S", rpingSize, "ping data size")
	fs.BoolVar(&cfg.persistent, "P", false, "persistent server mode allowing multiple connections")
	fs.BoolVar(&cfg.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&cfg.validate, "V", false, "validate ping data")
	fs.BoolVar(&cfg.debug, "d", false, "debug printfs")
	fs.Bool("q", false, "accepted and ignored")
	cfg.mpa.register(fs)
	return fs
}

func parseRpingFlags(args []string, stderr io.Writer) (*rpingConfig, error) {
	cfg := &rpingConfig{}
	fs := newRpingFlagSet(cfg, stderr)
	if err := fs.Parse(expandShortFlags(fs, args)); err != nil {
		return nil, errUsage // the flag package has said what is wrong
	}
	bad := func(format string, a ...any) (*rpingConfig, error) {
		fmt.Fprintf(stderr, format+"\n", a...)
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		rpingUsage(stderr)
		return nil, errUsage
	}
	if cfg.server == cfg.client {
		rpingUsage(stderr)
		return nil, errUsage
	}
	if cfg.size < rpingMinSize || cfg.size > rpingMaxSize {
		return bad("Invalid size %d (valid range is %d to %d)", cfg.size, rpingMinSize, rpingBufSize)
	}
	if cfg.count < 0 {
		return bad("Invalid count %d", cfg.count)
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return bad("Invalid port %d", cfg.port)
	}
	if cfg.client && cfg.addr == "" {
		return bad("the client needs -a addr")
	}
	if cfg.server && cfg.src != "" {
		return bad("-I applies to the client only")
	}
	if cfg.client && cfg.persistent {
		return bad("-P applies to the server only")
	}
	// rping's MPA parameters over siw: IRD = ORD = 1; where no IRD/ORD is
	// exchanged the peer is assumed to take one Read at a time. A client
	// offers what a siw client offers (no CRC, no peer-to-peer); a server
	// follows the client's CRC bit and accepts every RTR type.
	def := roleDefaults{crc: "off", p2p: "none"}
	if cfg.server {
		def.p2p = "write,read,send"
	}
	opts, err := cfg.mpa.options(def)
	if err != nil {
		return bad("%v", err)
	}
	cfg.opts = append([]conn.Option{conn.WithIRDORD(1, 1), conn.WithPeerIRD(1)}, opts...)
	return cfg, nil
}

// rping runs one rping client or server. ready, if not nil, is told the
// listening address of a server.
func rping(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) error {
	return rpingWith(ctx, args, stdout, stderr, ready, nil)
}

// rpingWith is rping with extra connection options after those of the
// command line (tests record the wire with conn.WithTap).
func rpingWith(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr), extra []conn.Option) error {
	cfg, err := parseRpingFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg.opts = append(cfg.opts, extra...)
	out := &syncWriter{w: stdout}
	errw := &syncWriter{w: stderr}
	if cfg.debug {
		if cfg.server {
			fmt.Fprintln(out, "server")
		} else {
			fmt.Fprintln(out, "client")
		}
		fmt.Fprintf(out, "port %d\nsize %d\ncount %d\n", cfg.port, cfg.size, cfg.count)
	}
	if cfg.server {
		return rpingServe(ctx, cfg, out, errw, ready)
	}
	return rpingClient(ctx, cfg, out, errw)
}

// syncWriter serialises the lines of a persistent server's connections.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// The numbers of rping's test states DISCONNECTED and ERROR, which its
// "wait for <state> state %d" messages print.
const (
	stateDisconnected = 10
	stateError        = 11
)

// errDisconnected: the peer went away (rping's DISCONNECTED state).
var errDisconnected = errors.New("disconnected")

// rpingEndpoint is one side's queue pair and buffers.
type rpingEndpoint struct {
	pd    *conn.PD
	cq    *conn.CQ
	qp    *conn.QP
	recv  *conn.MR // one 16-byte receive buffer, reposted after each use
	send  *conn.MR // 2×16 bytes: the two advertisements of an iteration
	rdma  *conn.MR // Read sink (server) / Write sink (client)
	start *conn.MR // client only: the Read source
	debug bool
	out   io.Writer
	// Send completions seen and Sends posted: an advertisement buffer
	// is rewritten only after its Send completed.
	sendsDone, sendsPosted int
	wcs                    [4]conn.WorkCompletion
	queued                 []conn.WorkCompletion
}

func newRpingEndpoint(size int, client, debug bool, out io.Writer) (_ *rpingEndpoint, err error) {
	e := &rpingEndpoint{pd: conn.NewPD(), cq: conn.NewCQ(rpingSQDepth * 2), debug: debug, out: out}
	e.qp, err = e.pd.NewQP(e.cq, conn.QPCaps{SendDepth: rpingSQDepth, RecvDepth: rpingRQDepth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.qp.Close()
		}
	}()
	if e.recv, err = e.pd.Register(make([]byte, rpingInfoLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	if e.send, err = e.pd.Register(make([]byte, 2*rpingInfoLen), 0); err != nil {
		return nil, err
	}
	all := conn.LocalWrite | conn.RemoteRead | conn.RemoteWrite
	if e.rdma, err = e.pd.Register(make([]byte, size), all); err != nil {
		return nil, err
	}
	if client {
		if e.start, err = e.pd.Register(make([]byte, size), all); err != nil {
			return nil, err
		}
	}
	e.debugf("created pd, cq and qp; registered buffers of %d bytes", size)
	if err = e.postRecv(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *rpingEndpoint) debugf(format string, a ...any) {
	if e.debug {
		fmt.Fprintf(e.out, format+"\n", a...)
	}
}

func (e *rpingEndpoint) postRecv() error {
	return e.qp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{e.recv.SGE(0, rpingInfoLen)}})
}

// post posts one signaled work request, as rping signals all of them.
func (e *rpingEndpoint) post(op conn.Op, sge conn.SGE, remote conn.RemoteAddr) error {
	if err := e.qp.PostSend(conn.SendWR{Op: op, Flags: conn.Signaled, SGL: []conn.SGE{sge}, Remote: remote}); err != nil {
		if errors.Is(err, conn.ErrQPClosed) {
			return &rpingStateError{want: "posting " + op.String(), state: stateDisconnected, cause: err}
		}
		return fmt.Errorf("post send error %w", err)
	}
	if op == conn.OpSend {
		e.sendsPosted++
	}
	return nil
}

// waitSends waits until every Send posted so far has completed.
func (e *rpingEndpoint) waitSends(ctx context.Context) error {
	for e.sendsDone < e.sendsPosted {
		wc, err := e.pop(ctx)
		if err != nil {
			return err
		}
		if wc.Op != conn.WCSend {
			return fmt.Errorf("unexpected %s completion", wc.Op)
		}
	}
	return nil
}

// pop returns the next completion. It returns errDisconnected when the
// connection ended: flushed work, or the queue pair is done with nothing
// left to report.
func (e *rpingEndpoint) pop(ctx context.Context) (conn.WorkCompletion, error) {
	for {
		if len(e.queued) > 0 {
			wc := e.queued[0]
			e.queued = e.queued[1:]
			if wc.Status == conn.WCWRFlushErr {
				return wc, errDisconnected
			}
			if wc.Status != conn.WCSuccess {
				return wc, fmt.Errorf("cq completion failed status %d (%s: %v)", wc.Status, wc.Status, wc.Err())
			}
			switch wc.Op {
			case conn.WCSend:
				e.debugf("send completion")
				e.sendsDone++
			case conn.WCRDMAWrite:
				e.debugf("rdma write completion")
			case conn.WCRDMARead:
				e.debugf("rdma read completion")
			case conn.WCRecv:
				e.debugf("recv completion")
			}
			return wc, nil
		}
		if n := e.cq.Poll(e.wcs[:]); n > 0 {
			e.queued = append(e.queued[:0], e.wcs[:n]...)
			continue
		}
		select {
		case <-e.cq.Ready():
		case <-e.qp.Done():
			if n := e.cq.Poll(e.wcs[:]); n > 0 {
				e.queued = append(e.queued[:0], e.wcs[:n]...)
				continue
			}
			return conn.WorkCompletion{}, errDisconnected
		case <-ctx.Done():
			return conn.WorkCompletion{}, ctx.Err()
		}
	}
}

// next returns the next completion other than a Send's: rping only counts
// those.
func (e *rpingEndpoint) next(ctx context.Context) (conn.WorkCompletion, error) {
	for {
		wc, err := e.pop(ctx)
		if err != nil || wc.Op != conn.WCSend {
			return wc, err
		}
	}
}

// expect waits for a completion of kind op. want is the rping state the
// caller waits for, named in rping's message when something else happens.
func (e *rpingEndpoint) expect(ctx context.Context, op conn.WCOpcode, want string) (conn.WorkCompletion, error) {
	wc, err := e.next(ctx)
	if err == nil && wc.Op != op {
		err = fmt.Errorf("unexpected %s completion", wc.Op)
	}
	if err != nil {
		state := stateError
		if errors.Is(err, errDisconnected) {
			state = stateDisconnected
		}
		return wc, &rpingStateError{want: want, state: state, cause: err}
	}
	return wc, nil
}

// rpingStateError is rping's "wait for <want> state <state>" failure.
type rpingStateError struct {
	want  string
	state int
	cause error
}

func (e *rpingStateError) Error() string {
	return fmt.Sprintf("wait for %s state %d", e.want, e.state)
}

func (e *rpingStateError) Unwrap() error { return e.cause }

// expectRecv waits for the peer's next message, checks it the way rping
// does (exactly 16 bytes), decodes it and reposts the receive buffer.
func (e *rpingEndpoint) expectRecv(ctx context.Context, want string) (rpingInfo, error) {
	wc, err := e.expect(ctx, conn.WCRecv, want)
	if err != nil {
		return rpingInfo{}, err
	}
	if wc.ByteLen != rpingInfoLen {
		return rpingInfo{}, fmt.Errorf("Received bogus data, size %d", wc.ByteLen)
	}
	info, err := parseRpingInfo(e.recv.Bytes())
	if err != nil {
		return info, err
	}
	if err := e.postRecv(); err != nil {
		if errors.Is(err, conn.ErrQPClosed) {
			// The peer left between its message and the repost.
			return info, &rpingStateError{want: want, state: stateDisconnected, cause: err}
		}
		return info, fmt.Errorf("post recv error: %w", err)
	}
	return info, nil
}

// close ends the connection: gracefully (rdma_disconnect) unless ctx was
// cancelled, which is an interruption and resets it.
func (e *rpingEndpoint) close(ctx context.Context) {
	if ctx.Err() != nil {
		e.qp.Abort()
		return
	}
	e.qp.Close()
}

func hostPort(addr string, port int) string {
	return net.JoinHostPort(addr, strconv.Itoa(port))
}
