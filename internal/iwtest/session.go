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
	"strings"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/mpa"
)

func init() {
	register("iwtest", command{
		summary: "the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server",
		run: func(args []string, stdout, stderr io.Writer) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return iwtest(ctx, args, stdout, stderr, nil)
		},
	})
}

const (
	iwtProvokeAccess = 1
	iwtProvokeBounds = 2
)

// iwtConfig is iwtest's command line. Flag names and meanings are those of
// the C program (interop/siw/cprog/iwtest.c); the MPA flags and --peer-ird
// exist only here.
type iwtConfig struct {
	server, client bool
	addr           string
	port           int
	tests          []iwtTest
	sizes          []uint32
	iters          int
	dirs           string
	nsge           int
	timeout, wait  time.Duration
	ird, ord       int
	peerIRD        int
	pdata          string
	reject         bool
	expectReject   bool
	expectError    bool
	provoke        int
	verbose        bool

	mpa mpaFlags

	dirMask int // bit 0: c2s, bit 1: s2c
	maxsize uint32
	opts    []conn.Option // connection setup, without private data
}

func (c *iwtConfig) provokeName() string {
	if c.provoke == iwtProvokeAccess {
		return "access"
	}
	return "bounds"
}

// iwtTestList and iwtSizeList collect -T and -S; like getopt's, repeated
// flags add to the list.
type iwtTestList struct{ c *iwtConfig }

func (l iwtTestList) String() string { return "" }
func (l iwtTestList) Set(s string) error {
	for _, name := range strings.Split(s, ",") {
		if name == "all" {
			for t := iwtWrite; t < iwtNumTests; t++ {
				l.c.tests = append(l.c.tests, t)
			}
			continue
		}
		t, ok := parseIwtTest(name)
		if !ok {
			return fmt.Errorf("unknown test %s", name)
		}
		l.c.tests = append(l.c.tests, t)
	}
	return nil
}

type iwtSizeList struct{ c *iwtConfig }

func (l iwtSizeList) String() string { return "" }
func (l iwtSizeList) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		n, err := parseIwtSize(part)
		if err != nil {
			return err
		}
		l.c.sizes = append(l.c.sizes, n)
	}
	return nil
}

// parseIwtSize reads a message size: a number with an optional k or m
// suffix, from 1 byte to 16 MiB.
func parseIwtSize(s string) (uint32, error) {
	num, shift := s, 0
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		num, shift = s[:len(s)-1], 10
	case strings.HasSuffix(s, "m") || strings.HasSuffix(s, "M"):
		num, shift = s[:len(s)-1], 20
	}
	v, err := strconv.ParseUint(num, 10, 32)
	if err != nil || v<<shift < 1 || v<<shift > iwtMaxSize {
		return 0, fmt.Errorf("bad size %s (1..16m)", s)
	}
	return uint32(v << shift), nil
}

func iwtUsage(w io.Writer) {
	fmt.Fprint(w, `usage: iwarp-peer iwtest -s|-c [options]
  -s, --server            wait for one connection
  -c, --client            connect and drive the tests
  -a, --addr IP           address to listen on (server, default any) or connect to (client)
  -p, --port N            port (default 7175; a server's 0 picks a free one)
  -T, --tests LIST        comma list of write,read,send,send_se,send_inv,send_sge,write_sge or all
                          (client; default all)
  -S, --sizes LIST        message sizes, suffix k/m allowed, 1..16m (default 1,4096,65536);
                          on the server only the largest matters (default 16m)
  -n, --iters N           iterations per test, size and direction (default 1)
  -D, --dirs c2s|s2c|both directions of data flow (default both)
  -g, --sges N            SGEs for send_sge/write_sge (default 4, at most 6)
  -t, --timeout SEC       limit of every wait (default 30)
  -w, --wait SEC          server: how long to wait for a connection (default 120)
      --ird N             IRD advertised: inbound RDMA Reads (default 16; a power of two, 1..128)
      --ord N             ORD advertised: outbound RDMA Reads (default 16; a power of two, 1..128)
      --peer-ird N        RDMA Reads the peer takes when no IRD/ORD is exchanged (default 1)
  -P, --pdata TEXT        private data for connect, accept or reject (at most 251 bytes)
      --reject            server: reject the connection (with --pdata) and exit
      --expect-reject     client: succeed only if the connection is rejected
      --provoke MODE      advertise a bad RDMA Write sink (access: no remote write;
                          bounds: past the end of the region); succeed only if the
                          peer's Write ends the connection
      --expect-error      succeed only if an operation fails or the connection is lost
      --require-se-event  accepted for compatibility: the Solicited Event bit is always checked
      --require-inv-report accepted for compatibility: invalidations are always checked
      --print-pattern T,D,I,S  print the data pattern of test T, dir D, iteration I and
                          size S (at most 4096) in hex and exit
  -v, --verbose           trace every message on stderr
MPA options:
      --crc off|preferred|required   CRC32c (default preferred; a server follows the client)
      --mpa-rev 1|2       revision (client: sent; server: the only one accepted)
      --no-enhanced       revision 2 without the RFC 6581 Enhanced flag
      --p2p none|LIST     peer-to-peer RTR types (write,read,send) offered (client, default
                          write) or accepted (server, default write)
`)
}

func parseIwtestFlags(args []string, stderr io.Writer) (*iwtConfig, string, error) {
	c := &iwtConfig{}
	var timeoutSec, waitSec int
	var printPattern string
	var ignored bool
	fs := flag.NewFlagSet("iwtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { iwtUsage(stderr) }
	boolVar := func(p *bool, short, long string) {
		if short != "" {
			fs.BoolVar(p, short, false, "")
		}
		fs.BoolVar(p, long, false, "")
	}
	intVar := func(p *int, short, long string, def int) {
		if short != "" {
			fs.IntVar(p, short, def, "")
		}
		fs.IntVar(p, long, def, "")
	}
	strVar := func(p *string, short, long, def string) {
		if short != "" {
			fs.StringVar(p, short, def, "")
		}
		fs.StringVar(p, long, def, "")
	}
	boolVar(&c.server, "s", "server")
	boolVar(&c.client, "c", "client")
	strVar(&c.addr, "a", "addr", "")
	intVar(&c.port, "p", "port", iwtPort)
	fs.Var(iwtTestList{c}, "T", "")
	fs.Var(iwtTestList{c}, "tests", "")
	fs.Var(iwtSizeList{c}, "S", "")
	fs.Var(iwtSizeList{c}, "sizes", "")
	intVar(&c.iters, "n", "iters", 1)
	strVar(&c.dirs, "D", "dirs", "both")
	intVar(&c.nsge, "g", "sges", 4)
	intVar(&timeoutSec, "t", "timeout", 30)
	intVar(&waitSec, "w", "wait", 120)
	intVar(&c.ird, "", "ird", conn.DefaultIRD)
	intVar(&c.ord, "", "ord", conn.DefaultORD)
	intVar(&c.peerIRD, "", "peer-ird", conn.DefaultPeerIRD)
	strVar(&c.pdata, "P", "pdata", "")
	boolVar(&c.reject, "", "reject")
	boolVar(&c.expectReject, "", "expect-reject")
	var provoke string
	strVar(&provoke, "", "provoke", "")
	boolVar(&c.expectError, "", "expect-error")
	boolVar(&ignored, "", "require-se-event")
	boolVar(&ignored, "", "require-inv-report")
	strVar(&printPattern, "", "print-pattern", "")
	boolVar(&c.verbose, "v", "verbose")
	c.mpa.register(fs)
	if err := fs.Parse(expandShortFlags(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", err
		}
		return nil, "", errUsage // the flag package has said what is wrong
	}
	bad := func(format string, a ...any) (*iwtConfig, string, error) {
		fmt.Fprintf(stderr, "iwtest: "+format+"\n", a...)
		return nil, "", errUsage
	}
	if printPattern != "" {
		return nil, printPattern, nil
	}
	c.timeout = time.Duration(timeoutSec) * time.Second
	c.wait = time.Duration(waitSec) * time.Second
	switch provoke {
	case "":
	case "access":
		c.provoke = iwtProvokeAccess
	case "bounds":
		c.provoke = iwtProvokeBounds
	default:
		return bad("--provoke %q: want access or bounds", provoke)
	}
	switch c.dirs {
	case "c2s":
		c.dirMask = 1
	case "s2c":
		c.dirMask = 2
	case "both":
		c.dirMask = 3
	default:
		return bad("--dirs %q: want c2s, s2c or both", c.dirs)
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case c.server == c.client:
		return bad("give exactly one of -s and -c")
	case c.port < 0 || c.port > 65535 || (c.port == 0 && c.client):
		return bad("bad port %d", c.port)
	case c.iters < 1:
		return bad("bad iteration count %d", c.iters)
	case c.timeout <= 0 || c.wait <= 0:
		return bad("timeouts must be positive")
	case c.nsge < 1 || c.nsge > iwtMaxSGE:
		return bad("--sges %d: want 1 to %d", c.nsge, iwtMaxSGE)
	case len(c.pdata) > iwtMaxPData:
		return bad("private data of %d bytes (at most %d)", len(c.pdata), iwtMaxPData)
	case c.client && c.addr == "":
		return bad("the client needs -a")
	case c.reject && !c.server:
		return bad("--reject applies to the server")
	case c.expectReject && !c.client:
		return bad("--expect-reject applies to the client")
	}
	if len(c.tests) == 0 {
		_ = iwtTestList{c}.Set("all")
	}
	if len(c.sizes) == 0 {
		if c.server {
			c.sizes = []uint32{iwtMaxSize}
		} else {
			c.sizes = []uint32{1, 4096, 65536}
		}
	}
	for _, s := range c.sizes {
		c.maxsize = max(c.maxsize, s)
	}
	if c.provoke != 0 {
		c.maxsize = max(c.maxsize, 2)
	}
	opts, err := c.setupOptions()
	if err != nil {
		return bad("%v", err)
	}
	c.opts = opts
	return c, "", nil
}

// setupOptions turns the MPA and IRD/ORD flags into connection options.
// Flags not given keep the library's defaults (CRC preferred; a Write RTR
// offered as initiator, accepted as responder).
func (c *iwtConfig) setupOptions() ([]conn.Option, error) {
	for _, v := range []struct {
		name string
		n    int
	}{{"--ird", c.ird}, {"--ord", c.ord}, {"--peer-ird", c.peerIRD}} {
		if v.n < 1 || v.n > mpa.MaxAdvertisedIRDORD || v.n&(v.n-1) != 0 {
			return nil, fmt.Errorf("%s %d: want a power of two from 1 to %d", v.name, v.n, mpa.MaxAdvertisedIRDORD)
		}
	}
	opts, err := c.mpa.options(roleDefaults{crc: "preferred", p2p: "write"})
	if err != nil {
		return nil, err
	}
	return append([]conn.Option{conn.WithIRDORD(c.ird, c.ord), conn.WithPeerIRD(c.peerIRD)}, opts...), nil
}

// iwtest runs one iwtest client or server. ready, if not nil, is told a
// server's listening address. It returns nil when the run succeeded in
// the sense of PROTOCOL.md §8 (exit status 0).
func iwtest(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) error {
	cfg, pattern, err := parseIwtestFlags(args, stderr)
	if err != nil {
		return err
	}
	if pattern != "" {
		return iwtPrintPattern(pattern, stdout, stderr)
	}
	var ok bool
	if cfg.server {
		ok = iwtServe(ctx, cfg, stdout, stderr, ready)
	} else {
		ok = iwtClient(ctx, cfg, stdout, stderr)
	}
	if !ok {
		return errIwtFailed
	}
	return nil
}

// errIwtFailed: the run did not have the outcome asked for; the output
// says why.
var errIwtFailed = errors.New("the test run failed (see the RESULT, SUMMARY and diagnostic lines)")

func iwtPrintPattern(arg string, stdout, stderr io.Writer) error {
	var t, d, i, n uint32
	if k, err := fmt.Sscanf(arg, "%d,%d,%d,%d", &t, &d, &i, &n); err != nil || k != 4 || n < 1 || n > 4096 {
		fmt.Fprintln(stderr, "iwtest: --print-pattern wants test,dir,iter,size with size 1..4096")
		return errUsage
	}
	b := make([]byte, n)
	iwtPatternFill(b, iwtPhase{test: iwtTest(t), dir: uint8(d), iter: i, size: n}.seed(), 0, false)
	fmt.Fprintf(stdout, "%x\n", b)
	return nil
}

// iwtPDataLine formats the private data fields of iwtest's CONNECT,
// ESTABLISHED and REJECT lines.
func iwtPDataLine(ird, ord int, pd []byte) string {
	h := "-"
	if len(pd) > 0 {
		h = fmt.Sprintf("%x", pd)
	}
	t := make([]byte, len(pd))
	for i, ch := range pd {
		if ch >= 0x20 && ch < 0x7f && ch != '"' {
			t[i] = ch
		} else {
			t[i] = '.'
		}
	}
	return fmt.Sprintf("ird=%d ord=%d private_data_len=%d private_data=%s text=\"%s\"", ird, ord, len(pd), h, t)
}

// iwtSetupLine describes what connection setup settled, for the ESTABLISHED
// lines: fields iwtest's C version does not print, so parsers keyed on
// names are unaffected.
func iwtSetupLine(r *mpa.Result) string {
	if r == nil {
		return ""
	}
	p2p := "none"
	if r.P2P {
		p2p = strings.ToLower(r.RTR.String())
	}
	return fmt.Sprintf(" mpa_rev=%d enhanced=%s crc=%s p2p=%s", r.Revision, iwtYesNo(r.IRDORDKnown), iwtOnOff(r.CRC), p2p)
}

func iwtOnOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// effectiveIRDORD is what the queue pair works with: the negotiated values,
// or without an IRD/ORD exchange the configured IRD and the assumed peer
// IRD.
func (c *iwtConfig) effectiveIRDORD(r *mpa.Result) (int, int) {
	if r != nil && r.IRDORDKnown {
		return int(r.IRD), int(r.ORD)
	}
	return c.ird, c.peerIRD
}

// iwtResults aggregates phase results per test, size and direction over
// the iterations, as iwtest prints them.
type iwtResults struct {
	a          [2]iwtAgg
	ok, failed int
}

type iwtAgg struct {
	on     bool
	test   iwtTest
	size   uint32
	iters  int
	status iwtStatus
}

func (r *iwtResults) add(e *iwtEndpoint, ph *iwtPhase, st iwtStatus) {
	x := &r.a[ph.dir]
	if x.on && (x.test != ph.test || x.size != ph.size) {
		r.flushAll(e)
	}
	if !x.on {
		*x = iwtAgg{on: true, test: ph.test, size: ph.size}
	}
	x.iters++
	if x.status == iwtOK {
		x.status = st
	}
}

func (r *iwtResults) flushAll(e *iwtEndpoint) {
	for d := range r.a {
		x := &r.a[d]
		if !x.on {
			continue
		}
		e.printf("RESULT role=%s test=%s dir=%s size=%d iters=%d status=%s\n", e.role(), x.test,
			iwtDirName(uint8(d)), x.size, x.iters, x.status)
		if x.status == iwtOK {
			r.ok++
		} else {
			r.failed++
		}
		x.on = false
	}
}

// outcome is the exit decision of PROTOCOL.md §8.
func (e *iwtEndpoint) outcome(r *iwtResults, fatal, terminated bool) bool {
	e.printf("SUMMARY role=%s ok=%d failed=%d\n", e.role(), r.ok, r.failed)
	switch {
	case e.cfg.provoke != 0:
		return terminated
	case e.cfg.expectError:
		return e.dead || r.failed > 0
	}
	return !fatal && r.failed == 0
}

// close ends the connection at the end of a session: gracefully unless
// it failed, and after the queue pair has finished, says how it ended.
func (e *iwtEndpoint) close() {
	if e.dead {
		e.reportEnd()
	}
	if err := e.qp.Close(); err != nil {
		e.errorf("closing: %v", err)
	}
	if e.dead {
		e.reportEnd()
	}
}

func iwtClient(ctx context.Context, cfg *iwtConfig, out, errw io.Writer) bool {
	e, err := newIwtEndpoint(cfg, out, errw)
	if err != nil {
		fmt.Fprintf(errw, "iwtest: %v\n", err)
		return false
	}
	// The receive for the server's HELLO is posted before anything is
	// sent (PROTOCOL.md §3).
	if err := e.postCtrlRecv(); err != nil {
		return false
	}
	opts := append(cfg.opts[:len(cfg.opts):len(cfg.opts)], conn.WithPrivateData([]byte(cfg.pdata)))
	cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	err = e.qp.Connect(cctx, "tcp", net.JoinHostPort(cfg.addr, strconv.Itoa(cfg.port)), opts...)
	cancel()
	if err != nil {
		var rej *mpa.RejectedError
		if errors.As(err, &rej) {
			ird, ord := 0, 0
			if rej.Reply.HasIRDORD {
				ird, ord = int(rej.Reply.IRDORD.IRD), int(rej.Reply.IRDORD.ORD)
			}
			// status: what rdma_cm reports for an MPA Reply with the R
			// bit (-ECONNRESET), so both programs' lines read alike.
			e.printf("REJECT role=client status=%d %s\n", -int(syscall.ECONNRESET), iwtPDataLine(ird, ord, rej.PrivateData))
			return cfg.expectReject
		}
		e.errorf("connect: %v", err)
		e.printf("CONNECTION event=CONNECT_ERROR error=%q\n", err.Error())
		return false
	}
	res := e.qp.Negotiated()
	ird, ord := cfg.effectiveIRDORD(res)
	e.printf("ESTABLISHED role=client %s%s\n", iwtPDataLine(ird, ord, res.PeerPrivateData), iwtSetupLine(res))
	if cfg.expectReject {
		e.errorf("the connection was accepted, a reject was expected")
		e.close()
		return false
	}

	var r iwtResults
	fatal, terminated := false, false
	if err := e.sendCtrl(ctx, iwtMsg{Type: iwtHello, Size: cfg.maxsize, Iter: uint32(cfg.iters)}); err != nil {
		fatal = true
	} else if m, err := e.recvCtrl(ctx, iwtHello, nil); err != nil {
		fatal = true
	} else if m.Status != 0 {
		e.errorf("the server refused the session (status %s)", iwtStatus(m.Status))
		fatal = true
	}
	for _, t := range cfg.tests {
		for _, size := range cfg.sizes {
			for i := 0; i < cfg.iters && !fatal; i++ {
				for d := uint8(0); d < 2 && !fatal; d++ {
					if cfg.dirMask&(1<<d) == 0 {
						continue
					}
					ph := iwtPhase{test: t, dir: d, iter: uint32(i), size: size}
					st, err := e.clientPhase(ctx, &ph)
					r.add(e, &ph, st)
					terminated = terminated || st == iwtTerminated
					if err != nil || st == iwtTerminated || st == iwtNotTerminated {
						fatal = true
					}
				}
			}
		}
	}
	r.flushAll(e)
	if !fatal {
		err := e.postCtrlRecv()
		if err == nil {
			err = e.sendCtrl(ctx, iwtMsg{Type: iwtBye})
		}
		if err == nil {
			_, err = e.recvCtrl(ctx, iwtBye, nil)
		}
		fatal = err != nil
	}
	e.close()
	return e.outcome(&r, fatal, terminated)
}

func iwtServe(ctx context.Context, cfg *iwtConfig, out, errw io.Writer, ready func(net.Addr)) bool {
	addr := cfg.addr
	if addr == "" {
		addr = "0.0.0.0"
	}
	ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(cfg.port)), cfg.opts...)
	if err != nil {
		fmt.Fprintf(errw, "iwtest: listen on %s:%d: %v\n", addr, cfg.port, err)
		return false
	}
	defer ln.Close()
	fmt.Fprintf(out, "LISTENING port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	if ready != nil {
		ready(ln.Addr())
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.wait)
	req, err := ln.AcceptRequest(wctx)
	cancel()
	if err != nil {
		fmt.Fprintf(errw, "iwtest: no connection request: %v\n", err)
		return false
	}
	f := req.Request()
	ird, ord := 0, 0
	offered := "none"
	if f.HasIRDORD {
		// rdma_cm's view, as the C program prints it: the initiator's ORD
		// is what the responder must take (its IRD), and its IRD what the
		// responder may issue.
		ird, ord = int(min(f.IRDORD.ORD, 128)), int(min(f.IRDORD.IRD, 128))
		if f.IRDORD.P2P {
			offered = strings.ToLower(f.IRDORD.RTR.String())
		}
	}
	fmt.Fprintf(out, "CONNECT role=server %s mpa_rev=%d enhanced=%s crc=%s p2p=%s\n", iwtPDataLine(ird, ord, req.PrivateData()),
		f.Rev, iwtYesNo(f.Enhanced()), iwtOnOff(f.Flags&mpa.FlagCRC != 0), offered)
	rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.reject {
		err := req.Reject(rctx, []byte(cfg.pdata))
		fmt.Fprintf(out, "REJECTED role=server private_data_len=%d\n", len(cfg.pdata))
		if err != nil {
			fmt.Fprintf(errw, "iwtest: reject: %v\n", err)
		}
		return err == nil
	}
	if cfg.mpa.rev != 0 && int(f.Rev) != cfg.mpa.rev {
		fmt.Fprintf(errw, "iwtest: rejecting a request of MPA revision %d (--mpa-rev %d)\n", f.Rev, cfg.mpa.rev)
		_ = req.Reject(rctx, nil)
		return false
	}
	e, err := newIwtEndpoint(cfg, out, errw)
	if err != nil {
		fmt.Fprintf(errw, "iwtest: %v\n", err)
		_ = req.Reject(rctx, nil)
		return false
	}
	// The receive for HELLO is posted before the connection is accepted.
	if err := e.postCtrlRecv(); err != nil {
		return false
	}
	if err := req.Accept(rctx, e.qp, conn.WithPrivateData([]byte(cfg.pdata))); err != nil {
		e.errorf("accept: %v", err)
		return false
	}
	res := e.qp.Negotiated()
	ird, ord = cfg.effectiveIRDORD(res)
	e.printf("ESTABLISHED role=server ird=%d ord=%d%s\n", ird, ord, iwtSetupLine(res))

	var r iwtResults
	fatal, terminated, bye := false, false, false
	hello := iwtMsg{Type: iwtHello}
	if m, err := e.recvCtrl(ctx, iwtHello, nil); err != nil {
		fatal = true
	} else if m.Size > cfg.maxsize {
		e.errorf("the client wants %d-byte messages, the limit is %d (-S)", m.Size, cfg.maxsize)
		hello.Status = uint8(iwtLength)
	}
	if !fatal {
		err := e.postCtrlRecv()
		if err == nil {
			err = e.sendCtrl(ctx, hello)
		}
		fatal = err != nil || hello.Status != 0
	}
	for !fatal {
		m, err := e.recvCtrl(ctx, 0, nil)
		if err != nil {
			fatal = true
			break
		}
		if m.Type == iwtBye {
			bye = true
			break
		}
		if m.Type != iwtBegin || m.Test < iwtWrite || m.Test >= iwtNumTests || m.Dir > 1 || m.Size < 1 || m.Size > cfg.maxsize {
			e.errorf("unexpected message %s (test %d, dir %d, size %d)", m.Type, m.Test, m.Dir, m.Size)
			fatal = true
			break
		}
		ph := iwtPhase{test: m.Test, dir: m.Dir, iter: m.Iter, size: m.Size}
		st, err := e.serverPhase(ctx, &ph, &m)
		r.add(e, &ph, st)
		terminated = terminated || st == iwtTerminated
		if err != nil || st == iwtTerminated || st == iwtNotTerminated {
			fatal = true
		}
	}
	r.flushAll(e)
	if bye {
		if err := e.sendCtrl(ctx, iwtMsg{Type: iwtBye}); err != nil {
			fatal = true
		} else {
			// The client disconnects after BYE.
			select {
			case <-e.qp.Done():
			case <-time.After(cfg.timeout):
				e.errorf("the client did not disconnect within %v", cfg.timeout)
			case <-ctx.Done():
			}
		}
	}
	e.close()
	return e.outcome(&r, fatal, terminated)
}
