package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

func init() {
	register("bench", command{
		summary: "bandwidth and latency between two iwarp-go peers, beside raw Go TCP",
		run:     runBench,
	})
}

const benchPort = 18515 // perftest's default port

// benchConfig is the bench command line.
type benchConfig struct {
	server, client, loopback bool
	addr                     string
	port                     int
	op                       string // write, read or send
	size                     int
	iters, latIters          int
	duration                 time.Duration
	latTimed                 bool // the latency phase runs for duration
	window                   int
	crc                      bool
	json                     bool
	repeat                   int
	cpuProfile               string
	compareTCP               bool

	lastRun  bool // the run in progress is the last one
	connOpts []conn.Option
	progress io.Writer // nil: no progress line
	dialAddr string    // where the client connects
}

// Credits of a Send stream: the receiver keeps twice the window posted
// and returns credits in batches of a quarter of that.
func (c *benchConfig) credits() uint32     { return uint32(2 * c.window) }
func (c *benchConfig) creditBatch() uint32 { return uint32(max(1, c.window/2)) }

// warmup is the number of round trips not counted at the start of a
// counted latency phase.
func (c *benchConfig) warmup() int {
	if c.latTimed {
		return 0
	}
	return min(100, c.latIters/10)
}

// warmingUp reports whether round trip i, started at t of a phase started
// at start, is still part of the warm-up: the first warmup() round trips
// of a counted phase; of a timed one, the first 100 unless they take more
// than a tenth of the time.
func (c *benchConfig) warmingUp(i int64, start, t time.Time) bool {
	if c.latTimed {
		return i < 100 && t.Sub(start) < c.duration/10
	}
	return i < int64(c.warmup())
}

func (c *benchConfig) hasLatency() bool { return c.latTimed || c.latIters > 0 }

// latStopper says when the latency phase has its last round trip,
// counting the warm-up.
func (c *benchConfig) latStopper(start time.Time) stopper {
	if c.latTimed {
		return stopper{deadline: start.Add(c.duration)}
	}
	return stopper{iters: int64(c.latIters + c.warmup())}
}

func (c *benchConfig) latSamplesHint() int {
	if c.latTimed {
		return 1 << 16
	}
	return c.latIters
}

func (c *benchConfig) target() string {
	if c.dialAddr != "" {
		return c.dialAddr
	}
	return hostPort(c.addr, c.port)
}

func benchUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: iwarp-peer bench -s [-a ADDR] [-p PORT]")
	fmt.Fprintln(w, "       iwarp-peer bench -c -a ADDR [-p PORT] --op write|read|send --size BYTES (--iters N | --duration D) [--crc] [--json]")
	fmt.Fprintln(w, "       iwarp-peer bench --loopback --op ... --size ... [--compare-tcp] [--json]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A bandwidth phase (a stream of messages, --window in flight) and a latency phase")
	fmt.Fprintln(w, "(ping-pong, one round trip at a time) on connections of their own. --compare-tcp")
	fmt.Fprintln(w, "runs the same phases over a raw Go TCP connection in the same run. The server")
	fmt.Fprintln(w, "takes its parameters from the client.")
	fs.PrintDefaults()
}

// parseSize reads a byte count with an optional binary suffix: 64, 4k,
// 4KiB, 1m, 1MiB.
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n > benchMaxSize/mult {
		return 0, fmt.Errorf("size %q: want a byte count from 1 to %d, with an optional k/KiB, m/MiB suffix", s, benchMaxSize)
	}
	return n * mult, nil
}

func parseBenchFlags(args []string, stderr io.Writer) (*benchConfig, error) {
	cfg := &benchConfig{port: benchPort}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { benchUsage(stderr, fs) }
	var size string
	fs.BoolVar(&cfg.server, "s", false, "server: answer one client's sessions, then exit")
	fs.BoolVar(&cfg.client, "c", false, "client: run the benchmark against the server at -a")
	fs.BoolVar(&cfg.loopback, "loopback", false, "client and server in this process, over loopback TCP")
	fs.StringVar(&cfg.addr, "a", "", "address to connect to (client) or listen on (server, default all)")
	fs.IntVar(&cfg.port, "p", benchPort, "port")
	fs.StringVar(&cfg.op, "op", "write", "operation: write, read or send")
	fs.StringVar(&size, "size", "65536", "message size in bytes (k/KiB, m/MiB suffixes allowed)")
	fs.IntVar(&cfg.iters, "iters", 0, "messages in the bandwidth phase, round trips in the latency phase (default 1000)")
	fs.DurationVar(&cfg.duration, "duration", 0, "run each phase this long instead of --iters")
	fs.IntVar(&cfg.latIters, "lat-iters", -1, "round trips in the latency phase (default: --iters, at most 10000, or --duration; 0 skips it)")
	fs.IntVar(&cfg.window, "window", 64, "work requests in flight in the bandwidth phase (1 to 1024)")
	fs.BoolVar(&cfg.crc, "crc", false, "require the MPA CRC (default: off)")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of a table")
	fs.IntVar(&cfg.repeat, "repeat", 1, "run everything this many times and report medians and spread")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof)")
	fs.BoolVar(&cfg.compareTCP, "compare-tcp", false, "also run the same phases over raw Go TCP (with --loopback)")
	if err := fs.Parse(expandShortFlags(fs, args)); err != nil {
		return nil, errUsage
	}
	bad := func(format string, a ...any) (*benchConfig, error) {
		fmt.Fprintf(stderr, "iwarp-peer bench: "+format+"\n", a...)
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	roles := 0
	for _, r := range []bool{cfg.server, cfg.client, cfg.loopback} {
		if r {
			roles++
		}
	}
	if roles != 1 {
		return bad("give exactly one of -s, -c and --loopback")
	}
	switch cfg.op {
	case "write", "read", "send":
	default:
		return bad("--op %q: want write, read or send", cfg.op)
	}
	var err error
	if cfg.size, err = parseSize(size); err != nil || cfg.size == 0 {
		if err == nil {
			err = fmt.Errorf("size 0: want at least 1 byte")
		}
		return bad("--%v", err)
	}
	if cfg.iters < 0 || cfg.duration < 0 {
		return bad("--iters and --duration must not be negative")
	}
	if cfg.iters > 0 && cfg.duration > 0 {
		return bad("give --iters or --duration, not both")
	}
	if cfg.iters == 0 && cfg.duration == 0 {
		cfg.iters = 1000
	}
	switch {
	case cfg.latIters < -1:
		return bad("--lat-iters %d: must not be negative", cfg.latIters)
	case cfg.latIters == -1 && cfg.duration > 0:
		cfg.latIters, cfg.latTimed = 0, true
	case cfg.latIters == -1:
		cfg.latIters = min(cfg.iters, 10000)
	}
	if cfg.repeat < 1 || cfg.repeat > 1000 {
		return bad("--repeat %d: want 1 to 1000", cfg.repeat)
	}
	if cfg.repeat > 1 && cfg.server {
		return bad("--repeat is the client's choice")
	}
	if cfg.window < 1 || cfg.window > benchMaxWindow {
		return bad("--window %d: want 1 to %d", cfg.window, benchMaxWindow)
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return bad("-p %d: not a port", cfg.port)
	}
	if cfg.client && cfg.addr == "" {
		return bad("the client needs -a ADDR")
	}
	if cfg.compareTCP && !cfg.loopback {
		return bad("--compare-tcp needs --loopback: the baseline runs both ends in this process")
	}
	// Between iwarp-go peers: CRC as asked, peer-to-peer with a Write RTR
	// (the library's default), and room for 128 Reads in flight, as
	// perftest asks of siw for its Read test.
	crc := conn.CRCOff
	if cfg.crc {
		crc = conn.CRCRequired
	}
	cfg.connOpts = []conn.Option{conn.WithCRC(crc), conn.WithIRDORD(128, 128)}
	return cfg, nil
}

func runBench(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	if isTerminal(stderr) {
		cfg.progress = stderr // results, JSON or not, go to stdout
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return bench(ctx, cfg, stdout, stderr)
}

// benchResult is the JSON object of one run.
type benchResult struct {
	Op       string  `json:"op"`
	Size     int     `json:"size"`
	CRC      bool    `json:"crc"`
	Window   int     `json:"window"`
	Messages int64   `json:"messages"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	Gbps     float64 `json:"gbps"`
	MsgRate  float64 `json:"msg_rate"`
	LatIters int     `json:"lat_iters"`
	LatP50us float64 `json:"lat_p50_us"`
	LatP99us float64 `json:"lat_p99_us"`
	Setup    string  `json:"setup"`

	TCPMessages *int64   `json:"tcp_messages,omitempty"`
	TCPBytes    *int64   `json:"tcp_bytes,omitempty"`
	TCPSeconds  *float64 `json:"tcp_seconds,omitempty"`
	TCPGbps     *float64 `json:"tcp_gbps,omitempty"`
	TCPMsgRate  *float64 `json:"tcp_msg_rate,omitempty"`
	TCPLatP50us *float64 `json:"tcp_lat_p50_us,omitempty"`
	TCPLatP99us *float64 `json:"tcp_lat_p99_us,omitempty"`
	// Ratio is ours / raw TCP bandwidth; LatRatio ours / raw TCP median
	// latency.
	Ratio    *float64 `json:"ratio,omitempty"`
	LatRatio *float64 `json:"lat_ratio,omitempty"`

	// With --repeat: how many runs, and the smallest and largest value of
	// the main figures over them.
	Repeat         int      `json:"repeat"`
	GbpsMin        *float64 `json:"gbps_min,omitempty"`
	GbpsMax        *float64 `json:"gbps_max,omitempty"`
	LatP50usMin    *float64 `json:"lat_p50_us_min,omitempty"`
	LatP50usMax    *float64 `json:"lat_p50_us_max,omitempty"`
	TCPGbpsMin     *float64 `json:"tcp_gbps_min,omitempty"`
	TCPGbpsMax     *float64 `json:"tcp_gbps_max,omitempty"`
	TCPLatP50usMin *float64 `json:"tcp_lat_p50_us_min,omitempty"`
	TCPLatP50usMax *float64 `json:"tcp_lat_p50_us_max,omitempty"`
	RatioMin       *float64 `json:"ratio_min,omitempty"`
	RatioMax       *float64 `json:"ratio_max,omitempty"`
	LatRatioMin    *float64 `json:"lat_ratio_min,omitempty"`
	LatRatioMax    *float64 `json:"lat_ratio_max,omitempty"`
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fillPhase(bw phaseResult, lat []time.Duration) (msgs, bytes int64, secs, rate, msgRate, p50, p99 float64) {
	secs = bw.elapsed.Seconds()
	rate = gbps(bw.bytes, bw.elapsed)
	if secs > 0 {
		msgRate = float64(bw.messages) / secs
	}
	l50, l99 := latencySummary(lat)
	return bw.messages, bw.bytes, secs, rate, msgRate, micros(l50), micros(l99)
}

// bench runs the configured role.
func bench(ctx context.Context, cfg *benchConfig, stdout, stderr io.Writer) error {
	if cfg.server {
		addr := cfg.addr
		if addr == "" {
			addr = "0.0.0.0"
		}
		ln, err := conn.Listen(ctx, "tcp", hostPort(addr, cfg.port), cfg.connOpts...)
		if err != nil {
			return err
		}
		defer ln.Close()
		fmt.Fprintf(stderr, "bench server listening on %v\n", ln.Addr())
		return benchServe(ctx, ln, stderr)
	}

	var srvDone chan error
	if cfg.loopback {
		ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", cfg.connOpts...)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithCancel(ctx)
		srvDone = make(chan error, 1)
		go func() { srvDone <- benchServe(sctx, ln, stderr) }()
		defer func() {
			cancel()
			ln.Close()
			<-srvDone
		}()
		cfg.dialAddr = ln.Addr().String()
	}

	runs := make([]benchResult, 0, cfg.repeat)
	for i := 0; i < cfg.repeat; i++ {
		cfg.lastRun = i == cfg.repeat-1 // its last session ends a -s server
		r, err := benchOnce(ctx, cfg)
		if err != nil {
			if cfg.repeat > 1 {
				err = fmt.Errorf("run %d of %d: %w", i+1, cfg.repeat, err)
			}
			return err
		}
		runs = append(runs, r)
	}
	res := combineRuns(runs)
	if cfg.json {
		return json.NewEncoder(stdout).Encode(res)
	}
	printBenchTable(stdout, cfg, &res)
	return nil
}

// benchOnce measures iwarp-go and, if asked, raw TCP right after it.
func benchOnce(ctx context.Context, cfg *benchConfig) (benchResult, error) {
	bw, lat, setup, err := rdmaBench(ctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	res := benchResult{Op: cfg.op, Size: cfg.size, CRC: cfg.crc, Window: cfg.window, LatIters: len(lat), Setup: setup, Repeat: 1}
	res.Messages, res.Bytes, res.Seconds, res.Gbps, res.MsgRate, res.LatP50us, res.LatP99us = fillPhase(bw, lat)
	if !cfg.compareTCP {
		return res, nil
	}
	tbw, tlat, err := tcpBench(ctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	var t benchResult
	t.Messages, t.Bytes, t.Seconds, t.Gbps, t.MsgRate, t.LatP50us, t.LatP99us = fillPhase(tbw, tlat)
	res.TCPMessages, res.TCPBytes, res.TCPSeconds = &t.Messages, &t.Bytes, &t.Seconds
	res.TCPGbps, res.TCPMsgRate = &t.Gbps, &t.MsgRate
	if len(tlat) > 0 {
		res.TCPLatP50us, res.TCPLatP99us = &t.LatP50us, &t.LatP99us
	}
	if t.Gbps > 0 {
		r := res.Gbps / t.Gbps
		res.Ratio = &r
	}
	if len(lat) > 0 && t.LatP50us > 0 {
		r := res.LatP50us / t.LatP50us
		res.LatRatio = &r
	}
	return res, nil
}

// combineRuns summarises repeated runs by their medians: the bandwidth
// figures (messages, bytes, seconds, rates) are those of the run with the
// median bandwidth, so that they stay consistent with each other; each
// latency figure and each ratio is the median over the runs (a ratio
// pairs a run with the baseline measured right after it, under the same
// load). The spread is reported as the minimum and maximum.
func combineRuns(runs []benchResult) benchResult {
	if len(runs) == 1 {
		return runs[0]
	}
	res := medianBy(runs, func(r *benchResult) float64 { return r.Gbps })
	res.Repeat = len(runs)
	res.LatP50us, res.LatP99us = medianOf(runs, func(r *benchResult) *float64 { return &r.LatP50us }), medianOf(runs, func(r *benchResult) *float64 { return &r.LatP99us })
	res.GbpsMin, res.GbpsMax = spread(runs, func(r *benchResult) *float64 { return &r.Gbps })
	res.LatP50usMin, res.LatP50usMax = spread(runs, func(r *benchResult) *float64 { return &r.LatP50us })
	if runs[0].TCPGbps != nil {
		t := medianBy(runs, func(r *benchResult) float64 { return *r.TCPGbps })
		res.TCPMessages, res.TCPBytes, res.TCPSeconds, res.TCPGbps, res.TCPMsgRate = t.TCPMessages, t.TCPBytes, t.TCPSeconds, t.TCPGbps, t.TCPMsgRate
		res.TCPGbpsMin, res.TCPGbpsMax = spread(runs, func(r *benchResult) *float64 { return r.TCPGbps })
		res.Ratio = ptr(medianOf(runs, func(r *benchResult) *float64 { return r.Ratio }))
		res.RatioMin, res.RatioMax = spread(runs, func(r *benchResult) *float64 { return r.Ratio })
	}
	if runs[0].TCPLatP50us != nil {
		res.TCPLatP50us = ptr(medianOf(runs, func(r *benchResult) *float64 { return r.TCPLatP50us }))
		res.TCPLatP99us = ptr(medianOf(runs, func(r *benchResult) *float64 { return r.TCPLatP99us }))
		res.TCPLatP50usMin, res.TCPLatP50usMax = spread(runs, func(r *benchResult) *float64 { return r.TCPLatP50us })
	}
	if runs[0].LatRatio != nil {
		res.LatRatio = ptr(medianOf(runs, func(r *benchResult) *float64 { return r.LatRatio }))
		res.LatRatioMin, res.LatRatioMax = spread(runs, func(r *benchResult) *float64 { return r.LatRatio })
	}
	return res
}

func ptr(v float64) *float64 { return &v }

// medianBy returns the run with the median key (nearest rank).
func medianBy(runs []benchResult, key func(*benchResult) float64) benchResult {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(key(&runs[a]), key(&runs[b])) })
	return runs[idx[(len(idx)+1)/2-1]]
}

// medianOf is the nearest-rank median of a figure over the runs.
func medianOf(runs []benchResult, get func(*benchResult) *float64) float64 {
	v := make([]float64, 0, len(runs))
	for i := range runs {
		if p := get(&runs[i]); p != nil {
			v = append(v, *p)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[(len(v)+1)/2-1]
}

func spread(runs []benchResult, get func(*benchResult) *float64) (lo, hi *float64) {
	for i := range runs {
		p := get(&runs[i])
		if p == nil {
			continue
		}
		if lo == nil || *p < *lo {
			lo = ptr(*p)
		}
		if hi == nil || *p > *hi {
			hi = ptr(*p)
		}
	}
	return lo, hi
}

func printBenchTable(w io.Writer, cfg *benchConfig, r *benchResult) {
	fmt.Fprintf(w, "iwarp-peer bench: %s of %s, %d in flight, CRC %s\n", r.Op, formatBytes(int64(r.Size)), r.Window, map[bool]string{true: "on", false: "off"}[r.CRC])
	fmt.Fprintf(w, "  connection: %s\n", r.Setup)
	fmt.Fprintf(w, "  %-10s %12s %14s %12s %12s %12s\n", "", "messages", "bandwidth", "msg/s", "lat p50", "lat p99")
	row := func(name string, msgs int64, g, rate, p50, p99 float64, lat bool) {
		l50, l99 := "-", "-"
		if lat {
			l50, l99 = fmt.Sprintf("%.1f µs", p50), fmt.Sprintf("%.1f µs", p99)
		}
		fmt.Fprintf(w, "  %-10s %12d %9.3f Gb/s %12.0f %12s %12s\n", name, msgs, g, rate, l50, l99)
	}
	row("iwarp-go", r.Messages, r.Gbps, r.MsgRate, r.LatP50us, r.LatP99us, r.LatIters > 0)
	if r.TCPGbps != nil {
		row("raw TCP", *r.TCPMessages, *r.TCPGbps, *r.TCPMsgRate, deref(r.TCPLatP50us), deref(r.TCPLatP99us), r.TCPLatP50us != nil)
		lr := "-"
		if r.LatRatio != nil {
			lr = fmt.Sprintf("%.2f", *r.LatRatio)
		}
		fmt.Fprintf(w, "  %-10s %12s %14s %12s %12s\n", "ratio", "", fmt.Sprintf("%.2f", deref(r.Ratio)), "", lr)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
