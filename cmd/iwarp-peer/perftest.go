package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/connflags"
	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/perftest"
)

func perftestUsage(w io.Writer) {
	fmt.Fprint(w, `usage: iwarp-peer perftest OP [options] [SERVER]
  OP is write_bw, read_bw, send_bw, write_lat, read_lat or send_lat; with SERVER
  this side is the client of a perftest server there, without it the server.
  atomic_bw and atomic_lat (RFC 7306 atomics, 8 bytes) run between iwarp-go
  peers only: Linux siw implements no atomics.
  Options are perftest's and mean what they mean there:
  -p, --port=<port>      listen on or connect to <port> (default 18515; a server's 0
                         picks a free one and prints it)
  -s, --size=<size>      message size; K and M suffixes (default 65536 bw, 2 lat)
  -n, --iters=<iters>    messages (at least 5, default 5000 write_bw, 1000 others)
  -D, --duration=<sec>   run for <sec> seconds instead
  -a, --all              every message size from 2 bytes to 8 MiB
  -q, --qp=<num>         queue pairs, bandwidth tests only (default 1)
  -t, --tx-depth=<dep>   work requests in flight (default 128 bw, 1 lat)
  -j, --source_ip=<ip>   the server's listening address (default any)
      --report_gbits     bandwidth in Gb/s instead of MB/s
  -A, --atomic_type=<t>  FETCH_AND_ADD (default) or CMP_AND_SWAP, atomic tests
  -R, --rdma_cm          accepted: connections always use rdma_cm's way (iWARP)
  -F                     accepted: no CPU clock to check (Go's monotonic clock)
      --crc=off|preferred|required   MPA CRC (default off, as between two siw peers;
                         a server follows a client that asks)
`)
	fmt.Fprint(w, metricsUsage)
	fmt.Fprint(w, limitsUsage)
	fmt.Fprint(w, tlsUsage)
}

// runPerftest implements "iwarp-peer perftest OP [options] [SERVER]".
func runPerftest(ctx context.Context, args []string, std stdio) error {
	f := newFlags("perftest", std, perftestUsage, false)
	switch {
	case len(args) == 0:
		return f.badUsage("give a test")
	case strings.HasPrefix(args[0], "-"):
		if err := f.parse(args); err != nil {
			return err // -h, or a mistake
		}
		return f.badUsage("give the test before the options")
	}
	test, err := perftest.ParseTest(args[0])
	if err != nil {
		return f.badUsage("%v", err)
	}
	cfg := perftest.Config{Test: test, Output: std.out}
	var port, secs int
	var bind, crc string
	for _, name := range []string{"p", "port"} {
		f.IntVar(&port, name, perftest.DefaultPort, "")
	}
	for _, name := range []string{"s", "size"} {
		f.Func(name, "", func(v string) (err error) {
			cfg.Size, err = perftest.ParseSize(v)
			return err
		})
	}
	for _, v := range []struct {
		p     *int
		names []string
	}{{&cfg.Iters, []string{"n", "iters"}}, {&secs, []string{"D", "duration"}}, {&cfg.QPs, []string{"q", "qp"}},
		{&cfg.TxDepth, []string{"t", "tx-depth"}}} {
		for _, name := range v.names {
			f.IntVar(v.p, name, 0, "")
		}
	}
	f.BoolVar(&cfg.AllSizes, "a", false, "")
	f.BoolVar(&cfg.AllSizes, "all", false, "")
	f.BoolVar(&cfg.ReportGbits, "report_gbits", false, "")
	for _, name := range []string{"A", "atomic_type"} {
		f.Func(name, "", func(v string) (err error) {
			cfg.Atomic, err = perftest.ParseAtomicType(v)
			return err
		})
	}
	f.StringVar(&bind, "j", "", "")
	f.StringVar(&bind, "source_ip", "", "")
	f.StringVar(&crc, "crc", "off", "")
	metricsF, limits, tf := f.metrics(), f.limits(), f.tls()
	for _, name := range []string{"R", "rdma_cm", "F"} {
		f.Bool(name, false, "")
	}
	// getopt permutes: the server's address may come before the options.
	var server string
	for rest := args[1:]; ; {
		if err := f.parse(rest); err != nil {
			return err
		}
		if f.NArg() == 0 {
			break
		}
		if server != "" {
			return f.badUsage("more than one server address: %q, %q", server, f.Arg(0))
		}
		server, rest = f.Arg(0), f.Args()[1:]
	}
	cfg.Duration = time.Duration(secs) * time.Second
	mode, err := connflags.ParseCRC(crc)
	if err != nil {
		return f.bad("%v", err)
	}
	tlsOpts, err := tf.Options(server == "")
	if err != nil {
		return f.bad("%v", err)
	}
	cfg.ConnOptions = append(append(cfg.ConnOptions, conn.WithCRC(mode)), tlsOpts...)
	cfg.ConnOptions = append(cfg.ConnOptions, connlog.Options(ctx)...)
	srv, err := serveMetrics(metricsF, "perftest", std)
	if err != nil {
		return err
	}
	defer srv.Close()
	pd := conn.NewPD()
	if server != "" {
		_, err = perftest.Dial(ctx, net.JoinHostPort(server, strconv.Itoa(port)), pd, cfg)
		return err
	}
	lnOpts := append(append([]conn.Option{}, cfg.ConnOptions...), limits.Options()...)
	ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(bind, strconv.Itoa(port)), lnOpts...)
	if err != nil {
		return err
	}
	defer ln.Close()
	srv.AddListener(ln)
	if port == 0 {
		fmt.Fprintf(std.out, "listening on port %d\n", ln.Addr().(*net.TCPAddr).Port)
	}
	if _, err = perftest.Serve(ctx, ln, pd, cfg); err != nil && ctx.Err() == nil {
		return err
	}
	return stopped(ctx, "perftest", std)
}
