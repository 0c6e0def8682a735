package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/stretchr/testify/require"
)

func TestBench_Flags(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "give exactly one of -s, -c and --loopback"},
		{[]string{"-s", "-c", "-a", "x"}, "give exactly one of"},
		{[]string{"--loopback", "--op", "atomic"}, `--op "atomic"`},
		{[]string{"--loopback", "--size", "0"}, "size 0"},
		{[]string{"--loopback", "--size", "257MiB"}, `size "257MiB"`},
		{[]string{"--loopback", "--size", "lots"}, `size "lots"`},
		{[]string{"--loopback", "--iters", "10", "--duration", "1s"}, "not both"},
		{[]string{"--loopback", "--iters", "-1"}, "must not be negative"},
		{[]string{"--loopback", "--lat-iters", "-2"}, "--lat-iters -2"},
		{[]string{"--loopback", "--window", "0"}, "--window 0"},
		{[]string{"--loopback", "--window", "1025"}, "--window 1025"},
		{[]string{"-c"}, "the client needs -a ADDR"},
		{[]string{"-c", "-a", "h", "--compare-tcp"}, "--compare-tcp needs --loopback"},
		{[]string{"-s", "-p", "65536"}, "-p 65536"},
		{[]string{"--loopback", "extra"}, `unexpected argument "extra"`},
		{[]string{"--loopback", "--nope"}, "flag provided but not defined: -nope"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			require.Equal(t, 2, run(append([]string{"bench"}, c.args...), &out, &errb), errb.String())
			require.Contains(t, errb.String(), c.msg)
			require.Empty(t, out.String())
		})
	}

	cfg, err := parseBenchFlags([]string{"-c", "-a", "10.1.1.1", "--op", "read", "--size", "1MiB", "--duration", "2s", "--crc"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 1<<20, cfg.size)
	require.Equal(t, 2*time.Second, cfg.duration)
	require.True(t, cfg.latTimed, "a timed run times its latency phase")
	require.Equal(t, "10.1.1.1:18515", cfg.target())
	cfg, err = parseBenchFlags([]string{"--loopback", "--iters", "50000"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 10000, cfg.latIters, "latency round trips are capped by default")
	require.Equal(t, "write", cfg.op)
	require.Equal(t, 65536, cfg.size)
	cfg, err = parseBenchFlags([]string{"--loopback"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 1000, cfg.iters)
	require.Equal(t, uint32(128), cfg.credits())
	require.Equal(t, uint32(32), cfg.creditBatch())
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{
		"64": 64, "4k": 4096, "4KiB": 4096, "1m": 1 << 20, "1MiB": 1 << 20, "256MiB": 256 << 20, "8 B": 8, "0": 0,
	} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1.5m", "1TiB", "257m", "k"} {
		_, err := parseSize(in)
		require.Error(t, err, in)
	}
}

func TestBenchSession_RoundTripAndBounds(t *testing.T) {
	s := benchSession{phase: phaseBandwidth, op: 's', final: true, size: 4096, window: 64, credits: 128, batch: 32,
		region: rpingInfo{Addr: 0x7f0000001000, RKey: 0x12345678, Size: 4096}}
	b := appendSession(nil, s)
	require.Len(t, b, benchSessionLen)
	got, err := parseSession(b)
	require.NoError(t, err)
	require.Equal(t, s, got)

	mutate := func(f func(*benchSession)) []byte {
		c := s
		f(&c)
		return appendSession(nil, c)
	}
	for name, bad := range map[string][]byte{
		"short":      b[:39],
		"magic":      append([]byte("xxxx"), b[4:]...),
		"version":    append(append([]byte(benchMagic), 9), b[5:]...),
		"phase":      mutate(func(c *benchSession) { c.phase = 'x' }),
		"op":         mutate(func(c *benchSession) { c.op = 'a' }),
		"size0":      mutate(func(c *benchSession) { c.size = 0 }),
		"size-huge":  mutate(func(c *benchSession) { c.size = benchMaxSize + 1 }),
		"window":     mutate(func(c *benchSession) { c.window = benchMaxWindow + 1 }),
		"credits":    mutate(func(c *benchSession) { c.credits = benchMaxCredits + 1; c.batch = 1 }),
		"batch":      mutate(func(c *benchSession) { c.batch = c.credits + 1 }),
		"no-credits": mutate(func(c *benchSession) { c.credits, c.batch = 0, 0 }),
	} {
		_, err := parseSession(bad)
		require.Error(t, err, name)
	}
	r := appendSessionReply(nil, s.region)
	adv, err := parseSessionReply(r)
	require.NoError(t, err)
	require.Equal(t, s.region, adv)
	_, err = parseSessionReply(r[:10])
	require.Error(t, err)
}

// runBenchJSON runs the bench command with --json and decodes its output.
func runBenchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(append([]string{"bench", "--json"}, args...), &out, &errb), errb.String())
	var m map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &m), out.String())
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out.String()), "\n")+1, "one JSON object on one line")
	return m
}

func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	require.True(t, ok, "%s missing from %v", key, m)
	return v
}

// checkRates checks that a result's figures agree with each other.
func checkRates(t *testing.T, m map[string]any, prefix string, size int) {
	t.Helper()
	msgs, b, secs := num(t, m, prefix+"messages"), num(t, m, prefix+"bytes"), num(t, m, prefix+"seconds")
	require.Positive(t, msgs)
	require.Equal(t, msgs*float64(size), b)
	require.Positive(t, secs)
	require.InEpsilon(t, b*8/secs/1e9, num(t, m, prefix+"gbps"), 1e-9)
	require.InEpsilon(t, msgs/secs, num(t, m, prefix+"msg_rate"), 1e-9)
	p50, p99 := num(t, m, prefix+"lat_p50_us"), num(t, m, prefix+"lat_p99_us")
	require.Positive(t, p50)
	require.GreaterOrEqual(t, p99, p50)
}

// A short loopback run of each operation beside raw TCP, checked through
// its JSON.
func TestBench_LoopbackJSON(t *testing.T) {
	for _, op := range []string{"write", "read", "send"} {
		t.Run(op, func(t *testing.T) {
			m := runBenchJSON(t, "--loopback", "--compare-tcp", "--op", op, "--size", "4KiB", "--iters", "300", "--lat-iters", "50")
			require.Equal(t, op, m["op"])
			require.Equal(t, 4096.0, num(t, m, "size"))
			require.Equal(t, 300.0, num(t, m, "messages"))
			require.Equal(t, 50.0, num(t, m, "lat_iters"))
			require.Equal(t, false, m["crc"])
			require.Contains(t, m["setup"], "MPA rev 2 enhanced, CRC off")
			checkRates(t, m, "", 4096)
			checkRates(t, m, "tcp_", 4096)
			require.Equal(t, 300.0, num(t, m, "tcp_messages"))
			require.InEpsilon(t, num(t, m, "gbps")/num(t, m, "tcp_gbps"), num(t, m, "ratio"), 1e-9)
			require.InEpsilon(t, num(t, m, "lat_p50_us")/num(t, m, "tcp_lat_p50_us"), num(t, m, "lat_ratio"), 1e-9)
		})
	}
}

// Odd sizes, one message in flight, CRC, a timed run and a run without
// its latency phase.
func TestBench_Variants(t *testing.T) {
	m := runBenchJSON(t, "--loopback", "--op", "send", "--size", "1", "--window", "1", "--iters", "40", "--lat-iters", "5", "--crc")
	require.Equal(t, true, m["crc"])
	require.Contains(t, m["setup"], "CRC32c on")
	checkRates(t, m, "", 1)
	require.NotContains(t, m, "tcp_gbps", "no baseline without --compare-tcp")

	m = runBenchJSON(t, "--loopback", "--op", "write", "--size", "70000", "--duration", "150ms", "--compare-tcp")
	require.GreaterOrEqual(t, num(t, m, "seconds"), 0.15)
	require.GreaterOrEqual(t, num(t, m, "tcp_seconds"), 0.15)
	require.Positive(t, num(t, m, "lat_iters"))
	checkRates(t, m, "", 70000)

	m = runBenchJSON(t, "--loopback", "--op", "read", "--size", "3", "--iters", "10", "--lat-iters", "0")
	require.Equal(t, 0.0, num(t, m, "lat_iters"))
	require.Equal(t, 30.0, num(t, m, "bytes"))
}

// The two-process form: a server (-s) answers a client (-c), then exits
// after the client's last session; a stray connection that is not a
// bench session is refused without ending the server.
func TestBench_ServerAndClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var log lockedBuffer
	done := make(chan error, 1)
	go func() { done <- benchServe(ctx, ln, &log) }()

	_, err = conn.Dial(ctx, "tcp", ln.Addr().String(), conn.NewPD(), conn.NewCQ(4), conn.QPCaps{},
		conn.WithPrivateData([]byte("hello")))
	require.ErrorContains(t, err, "not an iwarp-peer bench session")

	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var out, errb bytes.Buffer
	cfg, err := parseBenchFlags([]string{"-c", "-a", "127.0.0.1", "-p", port, "--op", "send", "--size", "100", "--iters", "500"}, &errb)
	require.NoError(t, err)
	require.NoError(t, bench(ctx, cfg, &out, &errb))
	require.NoError(t, <-done)
	require.Contains(t, log.String(), "refused")
	o := out.String()
	require.Contains(t, o, "iwarp-peer bench: send of 100 B, 64 in flight, CRC off")
	require.Regexp(t, `iwarp-go\s+500\s+[0-9.]+ Gb/s`, o)
	require.NotContains(t, o, "raw TCP")
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(101-i)) // reversed: latencySummary sorts
	}
	p50, p99 := latencySummary(s)
	require.Equal(t, time.Duration(50), p50)
	require.Equal(t, time.Duration(99), p99)
	require.Equal(t, time.Duration(100), percentile(s, 100))
	require.Equal(t, time.Duration(1), percentile(s, 0.5))
	require.Equal(t, time.Duration(7), percentile([]time.Duration{7}, 99))
	require.Equal(t, time.Duration(0), percentile(nil, 50))
	// Nearest rank on 3 samples: the median is the second.
	p50, _ = latencySummary([]time.Duration{30, 10, 20})
	require.Equal(t, time.Duration(20), p50)
}

func TestUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 64: "64 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 20: "1 MiB", 130 << 20: "130 MiB", 3 << 30: "3 GiB"} {
		require.Equal(t, want, formatBytes(n))
	}
	require.InDelta(t, 8.0, gbps(1e9, time.Second), 1e-9)
	require.Equal(t, 0.0, gbps(1, 0))
	require.Equal(t, "8.00 Gb/s", formatRate(1e9, time.Second))
	require.Equal(t, "8.0 Mb/s", formatRate(1e6, time.Second))
	require.Equal(t, "12.5 µs", formatDuration(12500*time.Nanosecond))
	require.Equal(t, "1.50 ms", formatDuration(1500*time.Microsecond))
	require.Equal(t, "2.00 s", formatDuration(2*time.Second))
	require.False(t, math.IsNaN(gbps(0, time.Second)))
}

func TestProgress(t *testing.T) {
	var p *progress
	p.add(1) // a nil progress does nothing
	p.finish()
	require.Nil(t, startProgress(nil, "x", 10, 0))
	require.False(t, isTerminal(&bytes.Buffer{}))

	old := progressDelay
	progressDelay = time.Millisecond
	defer func() { progressDelay = old }()
	var buf lockedBuffer
	p = startProgress(&buf, "write 4 KiB", 100, 0)
	p.add(50)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "%") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.finish()
	out := buf.String()
	require.Contains(t, out, "\rwrite 4 KiB:  50%, 50 messages")
	require.True(t, strings.HasSuffix(out, "\r\033[K"), "the line is cleared: %q", out)
}

func TestCombineRuns(t *testing.T) {
	mk := func(g, lat, tg, tlat float64) benchResult {
		r := benchResult{Op: "write", Gbps: g, Messages: int64(g * 10), LatP50us: lat, LatP99us: 2 * lat, Repeat: 1}
		r.TCPGbps, r.TCPLatP50us, r.TCPLatP99us = ptr(tg), ptr(tlat), ptr(2*tlat)
		r.Ratio, r.LatRatio = ptr(g/tg), ptr(lat/tlat)
		return r
	}
	runs := []benchResult{mk(3, 10, 4, 5), mk(1, 30, 2, 10), mk(2, 20, 5, 8)}
	c := combineRuns(runs)
	require.Equal(t, 3, c.Repeat)
	require.Equal(t, 2.0, c.Gbps, "the run with the median bandwidth")
	require.Equal(t, int64(20), c.Messages, "from that same run")
	require.Equal(t, 20.0, c.LatP50us)
	require.Equal(t, 40.0, c.LatP99us)
	require.Equal(t, 4.0, *c.TCPGbps)
	require.Equal(t, 8.0, *c.TCPLatP50us)
	require.Equal(t, 0.5, *c.Ratio, "median of 0.75, 0.5, 0.4")
	require.Equal(t, 2.5, *c.LatRatio, "median of 2, 3, 2.5")
	require.Equal(t, 1.0, *c.GbpsMin)
	require.Equal(t, 3.0, *c.GbpsMax)
	require.Equal(t, 0.4, *c.RatioMin)
	require.Equal(t, 0.75, *c.RatioMax)
	require.Equal(t, 5.0, *c.TCPLatP50usMin)
	require.Equal(t, 10.0, *c.TCPLatP50usMax)
	// One run is itself, without a spread.
	one := combineRuns(runs[:1])
	require.Equal(t, runs[0], one)
	require.Nil(t, one.GbpsMin)
}

func TestBench_Repeat(t *testing.T) {
	m := runBenchJSON(t, "--loopback", "--compare-tcp", "--repeat", "3", "--op", "write", "--size", "512", "--iters", "200", "--lat-iters", "20")
	require.Equal(t, 3.0, num(t, m, "repeat"))
	for _, k := range []string{"gbps", "lat_p50_us", "tcp_gbps", "tcp_lat_p50_us", "ratio", "lat_ratio"} {
		require.LessOrEqual(t, num(t, m, k+"_min"), num(t, m, k), k)
		require.GreaterOrEqual(t, num(t, m, k+"_max"), num(t, m, k), k)
	}
	checkRates(t, m, "", 512)
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"bench", "-s", "--repeat", "2"}, &out, &errb))
	require.Contains(t, errb.String(), "--repeat is the client's choice")
}

func TestBench_WarmUp(t *testing.T) {
	counted := &benchConfig{latIters: 1000}
	require.True(t, counted.warmingUp(99, time.Time{}, time.Time{}))
	require.False(t, counted.warmingUp(100, time.Time{}, time.Time{}))
	require.Equal(t, int64(1100), counted.latStopper(time.Now()).iters, "warm-up round trips come on top")
	require.Equal(t, 1, (&benchConfig{latIters: 10}).warmup())

	start := time.Now()
	timed := &benchConfig{latTimed: true, duration: time.Second}
	require.True(t, timed.warmingUp(5, start, start.Add(50*time.Millisecond)))
	require.False(t, timed.warmingUp(5, start, start.Add(150*time.Millisecond)), "at most a tenth of the time")
	require.False(t, timed.warmingUp(100, start, start))
}

func TestBench_CPUProfile(t *testing.T) {
	path := t.TempDir() + "/cpu.prof"
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"bench", "--loopback", "--size", "64", "--iters", "100", "--lat-iters", "10", "--cpuprofile", path}, &out, &errb), errb.String())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, b)
}
