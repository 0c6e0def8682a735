package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/connflags"
	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/iwtest"
)

func iwtestUsage(w io.Writer) {
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
	fmt.Fprint(w, metricsUsage)
}

// listFlag collects a comma list; like getopt's, repeated flags add to it.
type listFlag func(string) error

func (l listFlag) String() string     { return "" }
func (l listFlag) Set(s string) error { return l(s) }

// runIwtest is the command line of iwtest: the flag names and meanings of
// the C program (interop/siw/cprog/iwtest.c), plus the MPA flags and
// --peer-ird.
func runIwtest(ctx context.Context, args []string, std stdio) error {
	cfg := &iwtest.Config{Out: std.out, Err: std.err}
	var server, client, ignored bool
	var timeoutSec, waitSec int
	var dirs, provoke, printPattern string
	var m connflags.MPA
	f := newFlags("iwtest", std, iwtestUsage, false)
	both := func(short, long string, def any, p any) {
		for _, name := range []string{short, long} {
			switch p := p.(type) {
			case *bool:
				f.BoolVar(p, name, false, "")
			case *int:
				f.IntVar(p, name, def.(int), "")
			case *string:
				f.StringVar(p, name, def.(string), "")
			case listFlag:
				f.Var(p, name, "")
			}
		}
	}
	both("s", "server", nil, &server)
	both("c", "client", nil, &client)
	both("a", "addr", "", &cfg.Addr)
	both("p", "port", iwtest.Port, &cfg.Port)
	both("T", "tests", nil, listFlag(func(s string) error {
		tests, err := iwtest.ParseTests(s)
		cfg.Tests = append(cfg.Tests, tests...)
		return err
	}))
	both("S", "sizes", nil, listFlag(func(s string) error {
		sizes, err := iwtest.ParseSizes(s)
		cfg.Sizes = append(cfg.Sizes, sizes...)
		return err
	}))
	both("n", "iters", 1, &cfg.Iters)
	both("D", "dirs", "both", &dirs)
	both("g", "sges", 4, &cfg.SGEs)
	both("t", "timeout", 30, &timeoutSec)
	both("w", "wait", 120, &waitSec)
	f.IntVar(&cfg.IRD, "ird", conn.DefaultIRD, "")
	f.IntVar(&cfg.ORD, "ord", conn.DefaultORD, "")
	f.IntVar(&cfg.PeerIRD, "peer-ird", conn.DefaultPeerIRD, "")
	both("P", "pdata", "", &cfg.PrivateData)
	f.BoolVar(&cfg.Reject, "reject", false, "")
	f.BoolVar(&cfg.ExpectReject, "expect-reject", false, "")
	f.StringVar(&provoke, "provoke", "", "")
	f.BoolVar(&cfg.ExpectError, "expect-error", false, "")
	f.BoolVar(&ignored, "require-se-event", false, "")
	f.BoolVar(&ignored, "require-inv-report", false, "")
	f.StringVar(&printPattern, "print-pattern", "", "")
	both("v", "verbose", nil, &cfg.Verbose)
	m.Register(f.FlagSet)
	mf := f.metrics()
	if err := f.parse(args); err != nil {
		return err
	}
	if printPattern != "" {
		var t, d, i, n uint32
		if k, err := fmt.Sscanf(printPattern, "%d,%d,%d,%d", &t, &d, &i, &n); err != nil || k != 4 || n < 1 || n > 4096 {
			return f.bad("--print-pattern wants test,dir,iter,size with size 1..4096")
		}
		fmt.Fprintf(std.out, "%x\n", iwtest.Pattern(iwtest.Test(t), uint8(d), i, n))
		return nil
	}
	cfg.Timeout, cfg.Wait = time.Duration(timeoutSec)*time.Second, time.Duration(waitSec)*time.Second
	var err error
	if cfg.Dirs, err = iwtest.ParseDirs(dirs); err != nil {
		return f.bad("%v", err)
	}
	if cfg.Provoke, err = iwtest.ParseProvoke(provoke); err != nil {
		return f.bad("%v", err)
	}
	switch {
	case f.NArg() > 0:
		return f.bad("unexpected argument %q", f.Arg(0))
	case server == client:
		return f.bad("give exactly one of -s and -c")
	case cfg.Reject && !server:
		return f.bad("--reject applies to the server")
	case cfg.ExpectReject && !client:
		return f.bad("--expect-reject applies to the client")
	}
	if err := cfg.Check(server); err != nil {
		return f.bad("%v", err)
	}
	opts, err := m.Options()
	if err != nil {
		return f.bad("%v", err)
	}
	cfg.Options, cfg.Rev = append(opts, connlog.Options(ctx)...), m.Rev
	srv, err := serveMetrics(mf, "iwtest", std)
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.Listening = srv.AddListener
	if server {
		return iwtest.Serve(ctx, cfg)
	}
	return iwtest.Client(ctx, cfg)
}
