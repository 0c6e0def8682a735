package main

import (
	"context"
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
	"github.com/iwarp-go/iwarp-go/perftest"
)

func init() {
	register("perftest", command{
		summary: "perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server",
		run: func(args []string, stdout, stderr io.Writer) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPerftest(ctx, args, stdout, stderr)
		},
	})
}

const perftestUsage = `usage: iwarp-peer perftest OP [options] [SERVER]
  OP is write_bw, read_bw, send_bw, write_lat, read_lat or send_lat; with SERVER
  this side is the client of a perftest server there, without it the server.
  Options are perftest's and mean what they mean there:
  -p, --port=<port>      listen on or connect to <port> (default 18515)
  -s, --size=<size>      message size; K and M suffixes (default 65536 bw, 2 lat)
  -n, --iters=<iters>    messages (at least 5, default 5000 write_bw, 1000 others)
  -D, --duration=<sec>   run for <sec> seconds instead
  -a, --all              every message size from 2 bytes to 8 MiB
  -q, --qp=<num>         queue pairs, bandwidth tests only (default 1)
  -t, --tx-depth=<dep>   work requests in flight (default 128 bw, 1 lat)
  -j, --source_ip=<ip>   the server's listening address (default any)
      --report_gbits     bandwidth in Gb/s instead of MB/s
  -R, --rdma_cm          accepted: connections always use rdma_cm's way (iWARP)
  -F                     accepted: no CPU clock to check (Go's monotonic clock)
      --crc=off|preferred|required   MPA CRC (default off, as between two siw peers;
                         a server follows a client that asks)
`

// sizeFlag is -s: perftest takes a K or M suffix.
type sizeFlag struct{ v *int }

func (s sizeFlag) String() string { return "" }
func (s sizeFlag) Set(v string) error {
	mul := int64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mul, v = 1024, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mul, v = 1024*1024, strings.TrimSuffix(v, "M")
	}
	n, err := strconv.ParseInt(v, 0, 32)
	if err != nil || n*mul < 1 || n*mul > perftest.MaxMessageSize {
		return fmt.Errorf("message size should be between 1 and %d", perftest.MaxMessageSize)
	}
	*s.v = int(n * mul)
	return nil
}

func runPerftest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, perftestUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errUsage
	}
	test, err := perftest.ParseTest(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "%v\n%s", err, perftestUsage)
		return errUsage
	}
	cfg := perftest.Config{Test: test, Output: stdout}
	var port, secs int
	var bind, crc string
	fs := flag.NewFlagSet("perftest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, name := range []string{"p", "port"} {
		fs.IntVar(&port, name, perftest.DefaultPort, "")
	}
	for _, name := range []string{"s", "size"} {
		fs.Var(sizeFlag{&cfg.Size}, name, "")
	}
	for _, f := range []struct {
		v     *int
		names []string
	}{{&cfg.Iters, []string{"n", "iters"}}, {&secs, []string{"D", "duration"}}, {&cfg.QPs, []string{"q", "qp"}},
		{&cfg.TxDepth, []string{"t", "tx-depth"}}} {
		for _, name := range f.names {
			fs.IntVar(f.v, name, 0, "")
		}
	}
	fs.BoolVar(&cfg.AllSizes, "a", false, "")
	fs.BoolVar(&cfg.AllSizes, "all", false, "")
	fs.BoolVar(&cfg.ReportGbits, "report_gbits", false, "")
	fs.StringVar(&bind, "j", "", "")
	fs.StringVar(&bind, "source_ip", "", "")
	fs.StringVar(&crc, "crc", "off", "")
	for _, name := range []string{"R", "rdma_cm", "F"} {
		fs.Bool(name, false, "")
	}
	// getopt permutes: the server's address may come before the options.
	var server string
	for rest := args[1:]; ; {
		if err := fs.Parse(expandShortFlags(fs, rest)); err != nil {
			fmt.Fprintf(stderr, "%v\n%s", err, perftestUsage)
			if err == flag.ErrHelp {
				return err
			}
			return errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		if server != "" {
			fmt.Fprintf(stderr, "more than one server address: %q, %q\n", server, fs.Arg(0))
			return errUsage
		}
		server, rest = fs.Arg(0), fs.Args()[1:]
	}
	cfg.Duration = time.Duration(secs) * time.Second
	switch crc {
	case "off":
		cfg.ConnOptions = append(cfg.ConnOptions, conn.WithCRC(conn.CRCOff))
	case "preferred":
		cfg.ConnOptions = append(cfg.ConnOptions, conn.WithCRC(conn.CRCPreferred))
	case "required":
		cfg.ConnOptions = append(cfg.ConnOptions, conn.WithCRC(conn.CRCRequired))
	default:
		fmt.Fprintf(stderr, "--crc %q: want off, preferred or required\n", crc)
		return errUsage
	}
	pd := conn.NewPD()
	if server != "" {
		_, err = perftest.Dial(ctx, net.JoinHostPort(server, strconv.Itoa(port)), pd, cfg)
		return err
	}
	ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(bind, strconv.Itoa(port)), cfg.ConnOptions...)
	if err != nil {
		return err
	}
	defer ln.Close()
	_, err = perftest.Serve(ctx, ln, pd, cfg)
	return err
}
