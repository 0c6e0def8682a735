package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/bench"
	"github.com/iwarp-go/iwarp-go/internal/connflags"
	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/internal/progress"
	"github.com/iwarp-go/iwarp-go/internal/units"
)

func benchUsage(w io.Writer) {
	fmt.Fprint(w, `usage: iwarp-peer bench -s [-a ADDR] [-p PORT] [--once] [--max-sessions N]
       iwarp-peer bench -c -a ADDR [-p PORT] --op write|read|send --size BYTES (--iters N | --duration D) [--qps N] [--crc] [--json]
       iwarp-peer bench --loopback --op ... --size ... [--qps N] [--compare-tcp] [--json]

A bandwidth phase (a stream of messages, --window in flight) and a latency phase
(ping-pong, one round trip at a time) on connections of their own. With --qps N
the bandwidth phase streams over N queue pairs at once (--window and --iters
apply to each) and reports their sum; the latency phase uses one. --compare-tcp
runs the same phases over raw Go TCP in the same run (N connections), and with
--crc also the stream with CRC32c computed per 64 KiB and checked on both ends.
The latency phase reports the CPU time per round trip: of this process, which in
a loopback run holds both sides, and between processes of each side; with
--compare-tcp, that of both endpoints beside raw TCP's (cpu_ns_per_op,
tcp_cpu_ns_per_op, cpu_ratio) and the share of round trips slowed past twice
the median beside raw TCP's (lat_slow_ratio). A loopback run also reports each
bandwidth phase's CPU time per MiB moved, both ends (bw_cpu_ns_per_mib,
tcp_bw_cpu_ns_per_mib, tcp_crc_bw_cpu_ns_per_mib) and iwarp-go's over each
baseline's (bw_cpu_ratio, crc_bw_cpu_ratio), which unlike the Gb/s ratios do
not move when the host steals a core. The server
takes its parameters from the client and serves until interrupted; a client
with --qps N needs a server with --max-sessions N or more.
`)
}

// benchFlags are the bench command line beyond bench.Config.
type benchFlags struct {
	server, client, once, json bool
	addr                       string
	port                       int
	maxSessions                int
	cpuProfile                 string
	metrics                    *metricshttp.Flags
	limits                     *connflags.Limits
	tls                        *connflags.TLS
}

func parseBench(args []string, std stdio) (*bench.Config, *benchFlags, error) {
	cfg, b := &bench.Config{}, &benchFlags{}
	var size string
	f := newFlags("bench", std, benchUsage, true)
	f.BoolVar(&b.server, "s", false, "server: answer clients' sessions until interrupted")
	f.BoolVar(&b.once, "once", false, "server: exit after the first client whose run completed")
	f.BoolVar(&b.client, "c", false, "client: run the benchmark against the server at -a")
	f.BoolVar(&cfg.Loopback, "loopback", false, "client and server in this process, over loopback TCP")
	f.StringVar(&b.addr, "a", "", "address to connect to (client) or listen on (server, default all)")
	f.IntVar(&b.port, "p", bench.Port, "port")
	f.StringVar(&cfg.Op, "op", "write", "operation: write, read or send")
	f.StringVar(&size, "size", "65536", "message size in bytes (k/KiB, m/MiB suffixes allowed)")
	f.IntVar(&cfg.Iters, "iters", 0, "messages in the bandwidth phase, round trips in the latency phase (default 1000)")
	f.DurationVar(&cfg.Duration, "duration", 0, "run each phase this long instead of --iters")
	f.IntVar(&cfg.LatIters, "lat-iters", -1, "round trips in the latency phase (default: --iters, at most 10000, or --duration; 0 skips it)")
	f.IntVar(&cfg.Window, "window", 64, "work requests in flight in the bandwidth phase, per queue pair (1 to 1024)")
	f.IntVar(&cfg.QPs, "qps", 1, "queue pairs (connections) the bandwidth phase streams over at once (1 to 1024)")
	f.IntVar(&b.maxSessions, "max-sessions", bench.DefaultMaxSessions, "server: sessions (connections) served at once")
	f.BoolVar(&cfg.CRC, "crc", false, "require the MPA CRC (default: off)")
	f.BoolVar(&b.json, "json", false, "print one JSON object instead of a table")
	f.IntVar(&cfg.Repeat, "repeat", 1, "run everything this many times and report medians and spread")
	f.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof)")
	f.BoolVar(&cfg.CompareTCP, "compare-tcp", false, "also run the same phases over raw Go TCP (with --loopback)")
	b.metrics = f.metrics()
	b.limits, b.tls = f.limits(), f.tls()
	if err := f.parse(args); err != nil {
		return nil, nil, err
	}
	if err := f.noArgs(); err != nil {
		return nil, nil, err
	}
	roles := 0
	for _, r := range []bool{b.server, b.client, cfg.Loopback} {
		if r {
			roles++
		}
	}
	var err error
	cfg.Size, err = units.ParseSize(size, bench.MaxSize)
	switch {
	case roles != 1:
		return nil, nil, f.bad("give exactly one of -s, -c and --loopback")
	case cfg.Op != "write" && cfg.Op != "read" && cfg.Op != "send":
		return nil, nil, f.bad("--op %q: want write, read or send", cfg.Op)
	case err != nil:
		return nil, nil, f.bad("--%v", err)
	case cfg.Size == 0:
		return nil, nil, f.bad("--size 0: want at least 1 byte")
	case cfg.Iters < 0 || cfg.Duration < 0:
		return nil, nil, f.bad("--iters and --duration must not be negative")
	case cfg.Iters == 0 && f.given("iters"):
		return nil, nil, f.bad("--iters 0: want at least one message (or --duration D for a timed run)")
	case cfg.Iters > 0 && cfg.Duration > 0:
		return nil, nil, f.bad("give --iters or --duration, not both")
	case cfg.LatIters < -1:
		return nil, nil, f.bad("--lat-iters %d: must not be negative", cfg.LatIters)
	case cfg.Repeat < 1 || cfg.Repeat > 1000:
		return nil, nil, f.bad("--repeat %d: want 1 to 1000", cfg.Repeat)
	case cfg.Repeat > 1 && b.server:
		return nil, nil, f.bad("--repeat is the client's choice")
	case b.once && !b.server:
		return nil, nil, f.bad("--once applies to the server")
	case cfg.QPs < 1 || cfg.QPs > bench.MaxQPs:
		return nil, nil, f.bad("--qps %d: want 1 to %d", cfg.QPs, bench.MaxQPs)
	case b.maxSessions < 1:
		return nil, nil, f.bad("--max-sessions %d: want at least 1", b.maxSessions)
	case f.given("max-sessions") && !b.server:
		return nil, nil, f.bad("--max-sessions applies to the server")
	case cfg.Window < 1 || cfg.Window > bench.MaxWindow:
		return nil, nil, f.bad("--window %d: want 1 to %d", cfg.Window, bench.MaxWindow)
	case b.port < 0 || b.port > 65535:
		return nil, nil, f.bad("-p %d: not a port", b.port)
	case b.client && b.addr == "":
		return nil, nil, f.bad("the client needs -a ADDR")
	case cfg.CompareTCP && !cfg.Loopback:
		return nil, nil, f.bad("--compare-tcp needs --loopback: the baseline runs both ends in this process")
	}
	if cfg.Iters == 0 && cfg.Duration == 0 {
		cfg.Iters = 1000
	}
	switch {
	case cfg.LatIters == -1 && cfg.Duration > 0:
		cfg.LatIters, cfg.LatTimed = 0, true
	case cfg.LatIters == -1:
		cfg.LatIters = min(cfg.Iters, 10000)
	}
	cfg.Target = net.JoinHostPort(b.addr, strconv.Itoa(b.port))
	return cfg, b, nil
}

func runBench(ctx context.Context, args []string, std stdio) error {
	cfg, b, err := parseBench(args, std)
	if err != nil {
		return err
	}
	if b.cpuProfile != "" {
		f, err := os.Create(b.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	srv, err := serveMetrics(b.metrics, "bench", std)
	if err != nil {
		return err
	}
	defer srv.Close()
	if cfg.TLS, err = b.tls.Config(!b.client); err != nil { // a loopback run serves too
		return err
	}
	cfg.Options = connlog.Options(ctx)
	if cfg.TLS != nil {
		cfg.Options = append(cfg.Options, conn.WithTLS(cfg.TLS))
	}
	if b.server {
		addr := b.addr
		if addr == "" {
			addr = "0.0.0.0"
		}
		opts := append(append(bench.ConnOptions(cfg.CRC), cfg.Options...), b.limits.Options()...)
		ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(b.port)), opts...)
		if err != nil {
			return err
		}
		defer ln.Close()
		srv.AddListener(ln)
		fmt.Fprintf(std.err, "bench server listening on %v\n", ln.Addr())
		if err := bench.Serve(ctx, ln, bench.ServeConfig{Once: b.once, Log: std.err, MaxSessions: b.maxSessions}); err != nil {
			return err
		}
		return stopped(ctx, "bench", std)
	}
	if progress.IsTerminal(std.err) {
		cfg.Progress = std.err // results, JSON or not, go to stdout
	}
	cfg.Log = std.err
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if b.json {
		return json.NewEncoder(std.out).Encode(res)
	}
	printBenchTable(std.out, &res)
	return nil
}

// printBenchTable prints a result as a table: a row per transport, under
// each the spread of the runs (with --repeat), and the ratios of iwarp-go
// to raw TCP, bandwidth and latency each named.
func printBenchTable(w io.Writer, r *bench.Result) {
	runs := ""
	if r.Repeat > 1 {
		runs = fmt.Sprintf("; medians of %d runs", r.Repeat)
	}
	qps := ""
	if r.QPs > 1 {
		qps = fmt.Sprintf(" on each of %d queue pairs", r.QPs)
	}
	if r.TLS {
		runs = ", inside TLS" + runs
	}
	fmt.Fprintf(w, "iwarp-peer bench: %s of %s, %d in flight%s, CRC %s%s\n", r.Op, units.Bytes(int64(r.Size)), r.Window, qps, negotiated.OnOff(r.CRC), runs)
	fmt.Fprintf(w, "  connection: %s\n", r.Setup)
	const format = "  %-10s %12s %20s %12s %16s %12s\n"
	fmt.Fprintf(w, format, "", "messages", "bandwidth", "msg/s", "lat p50", "lat p99")
	row := func(name string, msgs int64, g, rate float64, p50, p99 *float64) {
		fmt.Fprintf(w, format, name, strconv.FormatInt(msgs, 10), fmt.Sprintf("%.3f Gb/s", g), fmt.Sprintf("%.0f", rate), latency(p50), latency(p99))
	}
	spread := func(glo, ghi, llo, lhi *float64) {
		if glo == nil {
			return
		}
		lat := "-"
		if llo != nil {
			lat = fmt.Sprintf("%.1f–%.1f µs", *llo, *lhi)
		}
		fmt.Fprintf(w, format, "  min–max", "", fmt.Sprintf("%.3f–%.3f Gb/s", *glo, *ghi), "", lat, "")
	}
	var p50, p99 *float64
	if r.LatIters > 0 {
		p50, p99 = &r.LatP50us, &r.LatP99us
	}
	row("iwarp-go", r.Messages, r.Gbps, r.MsgRate, p50, p99)
	if r.LatIters > 0 {
		spread(r.GbpsMin, r.GbpsMax, r.LatP50usMin, r.LatP50usMax)
	} else { // no latency phase: its spread is of zeros
		spread(r.GbpsMin, r.GbpsMax, nil, nil)
	}
	defer printLatencyNotes(w, r)
	if r.TCPGbps == nil {
		return
	}
	base := baseline(r)
	row(base, *r.TCPMessages, *r.TCPGbps, *r.TCPMsgRate, r.TCPLatP50us, r.TCPLatP99us)
	spread(r.TCPGbpsMin, r.TCPGbpsMax, r.TCPLatP50usMin, r.TCPLatP50usMax)
	if r.TCPCRCGbps != nil {
		fmt.Fprintf(w, format, "TCP+CRC", "", fmt.Sprintf("%.3f Gb/s", *r.TCPCRCGbps), fmt.Sprintf("%.0f", *r.TCPCRCMsgRate), "-", "-")
		spread(r.TCPCRCGbpsMin, r.TCPCRCGbpsMax, nil, nil)
	}
	fmt.Fprintf(w, "  iwarp-go / %s: bandwidth %s, latency p50 %s, p99 %s\n", base, ratio(r.Ratio, r.RatioMin, r.RatioMax),
		ratio(r.LatRatio, r.LatRatioMin, r.LatRatioMax), ratio(r.LatP99Ratio, r.LatP99RatioMin, r.LatP99RatioMax))
	if r.TCPCRCRatio != nil {
		fmt.Fprintf(w, "  iwarp-go / raw TCP with CRC32c: bandwidth %s\n", ratio(r.TCPCRCRatio, r.TCPCRCRatioMin, r.TCPCRCRatioMax))
	}
	if r.BwCPUnsPerMiB != nil && r.TCPBwCPUnsPerMiB != nil {
		line := fmt.Sprintf("  CPU per MiB moved (both ends): iwarp-go %.0f µs, %s %.0f µs, ratio %s", *r.BwCPUnsPerMiB/1e3,
			base, *r.TCPBwCPUnsPerMiB/1e3, ratio(r.BwCPURatio, r.BwCPURatioMin, r.BwCPURatioMax))
		if r.TCPCRCBwCPUnsPerMiB != nil {
			line += fmt.Sprintf("; raw TCP with CRC32c %.0f µs, ratio %s", *r.TCPCRCBwCPUnsPerMiB/1e3,
				ratio(r.CRCBwCPURatio, r.CRCBwCPURatioMin, r.CRCBwCPURatioMax))
		}
		fmt.Fprintln(w, line)
	}
}

// printLatencyNotes prints the share of slow round trips of the latency
// phase and its CPU time per round trip.
func printLatencyNotes(w io.Writer, r *bench.Result) {
	if r.LatIters == 0 {
		return
	}
	line := fmt.Sprintf("  round trips over twice the median: iwarp-go %.2f %%", r.LatSlowPct)
	if r.TCPLatSlowPct != nil {
		line += fmt.Sprintf(", %s %.2f %%", baseline(r), *r.TCPLatSlowPct)
	}
	if r.LatSlowRatio != nil {
		line += ", ratio " + ratio(r.LatSlowRatio, r.LatSlowRatioMin, r.LatSlowRatioMax)
	}
	fmt.Fprintln(w, line)
	printCPU(w, r)
}

// printCPU prints the CPU time per round trip of the latency phase, each
// figure saying whose it is.
func printCPU(w io.Writer, r *bench.Result) {
	if r.LatCPUus == nil {
		return
	}
	line := fmt.Sprintf("  CPU per round trip: iwarp-go %.1f µs (%s)", *r.LatCPUus, r.LatCPUScope)
	if r.ServerLatCPUus != nil {
		line += fmt.Sprintf(", iwarp-go server %.1f µs (its process)", *r.ServerLatCPUus)
	}
	if r.TCPLatCPUus != nil {
		line += fmt.Sprintf(", %s %.1f µs (both ends)", baseline(r), *r.TCPLatCPUus)
	}
	fmt.Fprintln(w, line)
	if r.CPUnsPerOp != nil && r.CPURatio != nil {
		fmt.Fprintf(w, "  CPU per round trip, both endpoints: iwarp-go %.0f ns, %s %.0f ns, ratio %s\n",
			*r.CPUnsPerOp, baseline(r), *r.TCPCPUnsPerOp, ratio(r.CPURatio, r.CPURatioMin, r.CPURatioMax))
	}
}

func latency(us *float64) string {
	if us == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f µs", *us)
}

// ratio prints a ratio and, over several runs, its range.
func ratio(v, lo, hi *float64) string {
	switch {
	case v == nil:
		return "-"
	case lo == nil:
		return fmt.Sprintf("%.2f", *v)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", *v, *lo, *hi)
}
