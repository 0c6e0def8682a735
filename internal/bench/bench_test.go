package bench

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBenchSession_RoundTripAndBounds(t *testing.T) {
	s := Session{Phase: PhaseBandwidth, Op: 's', Final: true, Size: 4096, Window: 64, Credits: 128, Batch: 32,
		Region: Region{TO: 0x7f0000001000, STag: 0x12345678, Len: 4096}}
	b := AppendSession(nil, s)
	require.Len(t, b, sessionLen)
	got, err := ParseSession(b)
	require.NoError(t, err)
	require.Equal(t, s, got)

	mutate := func(f func(*Session)) []byte {
		c := s
		f(&c)
		return AppendSession(nil, c)
	}
	for name, bad := range map[string][]byte{
		"short":      b[:39],
		"magic":      append([]byte("xxxx"), b[4:]...),
		"version":    append(append([]byte(magic), 9), b[5:]...),
		"phase":      mutate(func(c *Session) { c.Phase = 'x' }),
		"op":         mutate(func(c *Session) { c.Op = 'a' }),
		"size0":      mutate(func(c *Session) { c.Size = 0 }),
		"size-huge":  mutate(func(c *Session) { c.Size = MaxSize + 1 }),
		"window":     mutate(func(c *Session) { c.Window = MaxWindow + 1 }),
		"credits":    mutate(func(c *Session) { c.Credits = maxCredits + 1; c.Batch = 1 }),
		"batch":      mutate(func(c *Session) { c.Batch = c.Credits + 1 }),
		"no-credits": mutate(func(c *Session) { c.Credits, c.Batch = 0, 0 }),
		// A latency Write session: the server writes into the client's
		// region, which must hold a message and end at or below 2^64.
		"region-short": mutate(func(c *Session) { c.Phase, c.Op, c.Region.Len = PhaseLatency, 'w', 4095 }),
		"region-wraps": mutate(func(c *Session) { c.Phase, c.Op, c.Region.TO = PhaseLatency, 'w', math.MaxUint64-4094 }),
	} {
		_, err := ParseSession(bad)
		require.Error(t, err, name)
	}
	edge := s
	edge.Phase, edge.Op, edge.Region.TO = PhaseLatency, 'w', math.MaxUint64-4095 // ends at exactly 2^64
	_, err = ParseSession(AppendSession(nil, edge))
	require.NoError(t, err)
	r := AppendReply(nil, s.Region)
	adv, err := ParseReply(r)
	require.NoError(t, err)
	require.Equal(t, s.Region, adv)
	_, err = ParseReply(r[:10])
	require.Error(t, err)
}

// loopback is a loopback run of the command line's defaults.
func loopback(op string, size, iters, latIters int) *Config {
	return &Config{Loopback: true, Op: op, Size: size, Iters: iters, LatIters: latIters, Window: 64, Repeat: 1}
}

// runJSON runs cfg and decodes its result as bench --json prints it.
func runJSON(t *testing.T, cfg *Config) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
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

// checkSlowShare checks a single run's share of round trips over twice
// the median against its percentiles, taken from the same n samples: the
// 99th percentile (nearest rank) is over twice the median exactly when
// the samples from its rank up are.
func checkSlowShare(t *testing.T, m map[string]any, prefix string, n int) {
	t.Helper()
	p50, p99, slow := num(t, m, prefix+"lat_p50_us"), num(t, m, prefix+"lat_p99_us"), num(t, m, prefix+"lat_slow_pct")
	rank := int(math.Ceil(0.99 * float64(n)))
	if p99 > 2*p50 {
		require.GreaterOrEqual(t, slow, 100*float64(n-rank+1)/float64(n)-1e-9, "p50 %v, p99 %v", p50, p99)
	} else {
		require.LessOrEqual(t, slow, 100*float64(n-rank)/float64(n)+1e-9, "p50 %v, p99 %v", p50, p99)
	}
}

// A short loopback run of each operation beside raw TCP, checked through
// its JSON.
func TestBench_LoopbackJSON(t *testing.T) {
	for _, op := range []string{"write", "read", "send"} {
		t.Run(op, func(t *testing.T) {
			cfg := loopback(op, 4096, 300, 50)
			cfg.CompareTCP = true
			m := runJSON(t, cfg)
			require.Equal(t, op, m["op"])
			require.Equal(t, 4096.0, num(t, m, "size"))
			require.Equal(t, 300.0, num(t, m, "messages"))
			require.Equal(t, 50.0, num(t, m, "lat_iters"))
			require.Equal(t, false, m["crc"])
			require.Contains(t, m["setup"], "MPA rev 2 enhanced, CRC off")
			checkRates(t, m, "", 4096)
			checkRates(t, m, "tcp_", 4096)
			checkSlowShare(t, m, "", 50)
			checkSlowShare(t, m, "tcp_", 50)
			require.Equal(t, 300.0, num(t, m, "tcp_messages"))
			require.InEpsilon(t, num(t, m, "gbps")/num(t, m, "tcp_gbps"), num(t, m, "ratio"), 1e-9)
			require.InEpsilon(t, num(t, m, "lat_p50_us")/num(t, m, "tcp_lat_p50_us"), num(t, m, "lat_ratio"), 1e-9)
			require.InEpsilon(t, num(t, m, "lat_p99_us")/num(t, m, "tcp_lat_p99_us"), num(t, m, "lat_p99_ratio"), 1e-9)
			require.Equal(t, 1.0, num(t, m, "qps"))
			// Without CRC: FPDUs counted at both ends, none CRC-checked, and
			// no CRC baseline.
			require.GreaterOrEqual(t, num(t, m, "fpdus_received"), 300.0)
			require.Zero(t, num(t, m, "crc_checked_fpdus"))
			require.NotContains(t, m, "tcp_crc_gbps")
			require.NotContains(t, m, "tcp_crc_ratio")
			checkCPU(t, m, "process: client and server")
			require.NotContains(t, m, "server_lat_cpu_us_per_rt", "one process: its total is both sides'")
			if cpuMeasured() {
				require.Positive(t, num(t, m, "tcp_lat_cpu_us_per_rt"))
				require.InEpsilon(t, 1000*num(t, m, "lat_cpu_us_per_rt"), num(t, m, "cpu_ns_per_op"), 1e-9)
				require.InEpsilon(t, 1000*num(t, m, "tcp_lat_cpu_us_per_rt"), num(t, m, "tcp_cpu_ns_per_op"), 1e-9)
				require.InEpsilon(t, num(t, m, "cpu_ns_per_op")/num(t, m, "tcp_cpu_ns_per_op"), num(t, m, "cpu_ratio"), 1e-9)
			}
			if slow := num(t, m, "tcp_lat_slow_pct"); slow > 0 {
				require.InDelta(t, num(t, m, "lat_slow_pct")/slow, num(t, m, "lat_slow_ratio"), 1e-9)
			}
		})
	}
}

// cpuMeasured reports whether this system measures the process's CPU time.
func cpuMeasured() bool {
	_, ok := processCPU()
	return ok
}

// checkCPU checks the latency phase's CPU time per round trip, where the
// system measures it: positive, and said whose it is.
func checkCPU(t *testing.T, m map[string]any, scope string) {
	t.Helper()
	if !cpuMeasured() {
		require.NotContains(t, m, "lat_cpu_us_per_rt")
		return
	}
	require.Positive(t, num(t, m, "lat_cpu_us_per_rt"))
	require.Equal(t, scope, m["lat_cpu_scope"])
}

// --qps: the bandwidth phase streams over several queue pairs at once, and
// the baseline over as many raw TCP connections; each moves --iters
// messages, and the figures are their sum.
func TestBench_QPs(t *testing.T) {
	for _, op := range []string{"write", "read", "send"} {
		t.Run(op, func(t *testing.T) {
			cfg := loopback(op, 3000, 100, 10)
			cfg.QPs, cfg.CompareTCP = 5, true
			m := runJSON(t, cfg)
			require.Equal(t, 5.0, num(t, m, "qps"))
			require.Equal(t, 500.0, num(t, m, "messages"))
			require.Equal(t, 500.0, num(t, m, "tcp_messages"))
			checkRates(t, m, "", 3000)
			checkRates(t, m, "tcp_", 3000)
			require.Equal(t, 10.0, num(t, m, "lat_iters"), "the latency phase runs on one")
		})
	}
}

// With CRC: every FPDU either end received was CRC-checked, which the
// setup says, and the baseline runs a second time with CRC32c.
func TestBench_CRCChecked(t *testing.T) {
	for _, op := range []string{"write", "read", "send"} {
		t.Run(op, func(t *testing.T) {
			cfg := loopback(op, 4096, 200, 20)
			cfg.CRC, cfg.CompareTCP, cfg.QPs = true, true, 2
			m := runJSON(t, cfg)
			fpdus := num(t, m, "fpdus_received")
			require.GreaterOrEqual(t, fpdus, 400.0, "at least one FPDU per message")
			require.Equal(t, fpdus, num(t, m, "crc_checked_fpdus"))
			require.Zero(t, num(t, m, "crc_errors"))
			require.Contains(t, m["setup"], "CRC32c on")
			require.Contains(t, m["setup"], "; CRC checked on every FPDU received (")
			require.Positive(t, num(t, m, "tcp_crc_gbps"))
			require.Positive(t, num(t, m, "tcp_crc_msg_rate"))
			require.InEpsilon(t, num(t, m, "gbps")/num(t, m, "tcp_crc_gbps"), num(t, m, "tcp_crc_ratio"), 1e-9)
			require.InEpsilon(t, num(t, m, "gbps")/num(t, m, "tcp_gbps"), num(t, m, "ratio"), 1e-9)
			// CPU per MiB of each bandwidth phase (loopback: the process
			// holds both ends), and the ratios of the same run.
			for _, k := range []string{"bw_cpu_ns_per_mib", "tcp_bw_cpu_ns_per_mib", "tcp_crc_bw_cpu_ns_per_mib"} {
				require.Positive(t, num(t, m, k), k)
			}
			require.InEpsilon(t, num(t, m, "bw_cpu_ns_per_mib")/num(t, m, "tcp_crc_bw_cpu_ns_per_mib"), num(t, m, "crc_bw_cpu_ratio"), 1e-9)
			require.InEpsilon(t, num(t, m, "bw_cpu_ns_per_mib")/num(t, m, "tcp_bw_cpu_ns_per_mib"), num(t, m, "bw_cpu_ratio"), 1e-9)
		})
	}
}

// Odd sizes, one message in flight, CRC, a timed run and a run without
// its latency phase.
func TestBench_Variants(t *testing.T) {
	cfg := loopback("send", 1, 40, 5)
	cfg.Window, cfg.CRC = 1, true
	m := runJSON(t, cfg)
	require.Equal(t, true, m["crc"])
	require.Contains(t, m["setup"], "CRC32c on")
	checkRates(t, m, "", 1)
	require.NotContains(t, m, "tcp_gbps", "no baseline without --compare-tcp")

	cfg = loopback("write", 70000, 0, 0)
	cfg.Duration, cfg.LatTimed, cfg.CompareTCP = 150*time.Millisecond, true, true
	m = runJSON(t, cfg)
	require.GreaterOrEqual(t, num(t, m, "seconds"), 0.15)
	require.GreaterOrEqual(t, num(t, m, "tcp_seconds"), 0.15)
	require.Positive(t, num(t, m, "lat_iters"))
	checkRates(t, m, "", 70000)

	m = runJSON(t, loopback("read", 3, 10, 0))
	require.Equal(t, 0.0, num(t, m, "lat_iters"))
	require.Equal(t, 30.0, num(t, m, "bytes"))
}

// serve runs a server on a loopback listener in the background.
func serve(t *testing.T, ctx context.Context, cfg ServeConfig) (addr string, log *conntest.LockedBuffer, done chan error) {
	t.Helper()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", ConnOptions(false)...)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	log = &conntest.LockedBuffer{}
	cfg.Log = log
	done = make(chan error, 1)
	go func() { done <- Serve(ctx, ln, cfg) }()
	return ln.Addr().String(), log, done
}

// The two-process form: a server answers a client and, with Once, exits
// after the client's last session; a stray connection that is not a bench
// session is refused without ending the server.
func TestBench_ServerAndClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, log, done := serve(t, ctx, ServeConfig{Once: true})

	_, err := conn.Dial(ctx, "tcp", addr, conn.NewPD(), conn.NewCQ(4), conn.QPCaps{},
		conn.WithPrivateData([]byte("hello")))
	require.ErrorContains(t, err, "not an iwarp-peer bench session")

	cfg := &Config{Target: addr, Op: "send", Size: 100, Iters: 500, LatIters: 500, Window: 64, Repeat: 1}
	res, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Contains(t, log.String(), "refused")
	require.Equal(t, int64(500), res.Messages)
	require.Equal(t, "send", res.Op)
	require.Nil(t, res.TCPGbps)
}

// Between processes (here a server the client does not start), each side
// reports its own CPU time per round trip; several queue pairs need a
// server that serves as many sessions at once, and one that serves fewer
// refuses the rest, saying why.
func TestBench_ServerAndClientQPs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	addr, _, _ := serve(t, sctx, ServeConfig{MaxSessions: 3})
	cfg := &Config{Target: addr, Op: "write", Size: 1000, Iters: 200, LatIters: 200, Window: 16, Repeat: 1, QPs: 4}
	_, err := Run(ctx, cfg)
	require.ErrorContains(t, err, "too many sessions: the server serves 3 at once")
	stop()

	addr, log, done := serve(t, ctx, ServeConfig{Once: true, MaxSessions: 3})
	cfg.Target, cfg.QPs = addr, 3
	res, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, <-done, log.String())
	require.Equal(t, int64(600), res.Messages)
	require.Equal(t, 3, res.QPs)
	if cpuMeasured() {
		require.Equal(t, "client", res.LatCPUScope)
		require.NotNil(t, res.LatCPUus)
		require.Positive(t, *res.LatCPUus)
		require.NotNil(t, res.ServerLatCPUus, "the server's, from its report")
		require.Positive(t, *res.ServerLatCPUus)
		require.InEpsilon(t, 1000*(*res.LatCPUus+*res.ServerLatCPUus), *res.CPUnsPerOp, 1e-9, "both endpoints")
	}
}

// A session refused because the server serves as many as it may is tried
// again: the client's run starts once the session holding the place ends.
func TestBench_BusyServerRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, log, done := serve(t, ctx, ServeConfig{Once: true, MaxSessions: 1})
	holder := conntest.DialRaw(t, addr, AppendSession(nil, Session{Phase: PhaseLatency, Op: 's', Size: 1, Window: 1}))
	time.AfterFunc(300*time.Millisecond, func() { holder.C.Close() })
	start := time.Now()
	res, err := Run(ctx, &Config{Target: addr, Op: "write", Size: 64, Iters: 20, LatIters: 5, Window: 4, Repeat: 1})
	require.NoError(t, err, log.String())
	require.Equal(t, int64(20), res.Messages)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it waited for the place")
	require.NoError(t, <-done)
	require.Contains(t, log.String(), "refused", "the first tries were refused")
}

// A server without Once serves until stopped; none of these clients ends
// it or keeps the next one out: an MPA Request followed by a reset, a
// latency session whose region would end past 2^64, one that sends 40
// one-byte Sends and never reads, and one that keeps its session open.
func TestBench_ServerSurvivesBadClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	addr, log, done := serve(t, sctx, ServeConfig{})
	good := func() {
		t.Helper()
		res, err := Run(ctx, &Config{Target: addr, Op: "write", Size: 64, Iters: 50, LatIters: 10, Window: 8, Repeat: 1})
		require.NoError(t, err)
		require.Equal(t, int64(50), res.Messages)
	}
	session := func(s Session) []byte { return AppendSession(nil, s) }

	conntest.RequestThenReset(t, addr, session(Session{Phase: PhaseBandwidth, Op: 'w', Size: 64, Window: 8}))
	good()

	wraps := session(Session{Phase: PhaseLatency, Op: 'w', Size: 64, Window: 1,
		Region: Region{TO: math.MaxUint64 - 10, STag: 0x100, Len: 64}})
	_, err := conn.Dial(ctx, "tcp", addr, conn.NewPD(), conn.NewCQ(4), conn.QPCaps{}, conn.WithPrivateData(wraps))
	require.ErrorContains(t, err, "past 2^64")
	good()

	flood := conntest.DialRaw(t, addr, session(Session{Phase: PhaseLatency, Op: 's', Size: 1, Window: 1}))
	flood.Sends(t, 1, 40, []byte{'x'})
	good()
	// One that keeps its session open: two Sends, answered, never read.
	idle := conntest.DialRaw(t, addr, session(Session{Phase: PhaseLatency, Op: 's', Size: 1, Window: 1}))
	idle.Sends(t, 1, 2, []byte{'x'})
	good()
	good() // and again: nothing piles up

	select {
	case err := <-done:
		t.Fatalf("the server ended: %v\n%s", err, log.String())
	default:
	}
	stop()
	require.NoError(t, <-done, "a stopped server ends cleanly")
	require.Contains(t, log.String(), "past 2^64")
	require.Contains(t, log.String(), "session b/w from 127.0.0.1:", "the reset is logged")
}

// With Once, a client whose final session fails, here during or right
// after connection setup, does not count: the server waits for the next
// and ends after that one's run.
func TestBench_OnceCountsOnlyACompletedRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, log, done := serve(t, ctx, ServeConfig{Once: true})
	conntest.RequestThenReset(t, addr, AppendSession(nil, Session{Phase: PhaseBandwidth, Op: 'w', Final: true, Size: 64, Window: 8}))
	conntest.Garbage(t, addr)
	_, err := Run(ctx, &Config{Target: addr, Op: "read", Size: 64, Iters: 20, LatIters: 5, Window: 8, Repeat: 1})
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err, log.String())
	case <-ctx.Done():
		t.Fatalf("the server did not end after its client's run:\n%s", log.String())
	}
}

func TestCombineRuns(t *testing.T) {
	mk := func(g, lat, tg, tlat float64) Result {
		r := Result{Op: "write", Gbps: g, Messages: int64(g * 10), LatIters: 100, LatP50us: lat, LatP99us: 2 * lat, LatSlowPct: lat / 10, Repeat: 1}
		r.TCPGbps, r.TCPLatP50us, r.TCPLatP99us, r.TCPLatSlowPct = ptr(tg), ptr(tlat), ptr(2*tlat), ptr(tlat/10)
		r.Ratio, r.LatRatio = ptr(g/tg), ptr(lat/tlat)
		r.TCPCRCGbps, r.TCPCRCRatio, r.LatP99Ratio, r.LatCPUus = ptr(tg/2), ptr(2*g/tg), ptr(lat/tlat), ptr(lat/2)
		r.TCPLatCPUus = ptr(tlat / 2)
		r.CRCBwCPURatio = ptr(tg / g)
		fillMeasures(&r, true)
		return r
	}
	runs := []Result{mk(3, 10, 4, 5), mk(1, 30, 2, 10), mk(2, 20, 5, 8)}
	c := CombineRuns(runs)
	require.Equal(t, 3, c.Repeat)
	require.Equal(t, 2.0, c.Gbps, "the run with the median bandwidth")
	require.Equal(t, int64(20), c.Messages, "from that same run")
	require.Equal(t, 20.0, c.LatP50us)
	require.Equal(t, 40.0, c.LatP99us)
	require.Equal(t, 2.0, c.LatSlowPct, "median of 1, 3, 2")
	require.Equal(t, 0.8, *c.TCPLatSlowPct, "median of 0.5, 1, 0.8")
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
	require.Equal(t, 2.0, *c.TCPCRCGbps, "median of 2, 1, 2.5")
	require.Equal(t, 1.0, *c.TCPCRCGbpsMin)
	require.Equal(t, 1.0, *c.TCPCRCRatio, "median of 1.5, 1, 0.8")
	require.Equal(t, 0.8, *c.TCPCRCRatioMin)
	require.Equal(t, 1.5, *c.TCPCRCRatioMax)
	require.Equal(t, 2.5, *c.LatP99Ratio)
	require.Equal(t, 10.0, *c.LatCPUus, "median of 5, 15, 10")
	require.Nil(t, c.ServerLatCPUus, "no run has it")
	require.Equal(t, 10000.0, *c.CPUnsPerOp, "median of 5000, 15000, 10000 ns")
	require.Equal(t, 2.0, *c.CRCBwCPURatio, "median of 4/3, 2, 2.5")
	require.Equal(t, 4.0/3, *c.CRCBwCPURatioMin)
	require.Equal(t, 2.5, *c.CRCBwCPURatioMax)
	require.Nil(t, c.BwCPURatio, "no run has it")
	require.Equal(t, 4000.0, *c.TCPCPUnsPerOp, "median of 2500, 5000, 4000 ns")
	require.Equal(t, 2.5, *c.CPURatio, "median of the runs' ratios 2, 3, 2.5")
	require.Equal(t, 2.0, *c.CPURatioMin)
	require.Equal(t, 3.0, *c.CPURatioMax)
	require.Equal(t, 2.5, *c.LatSlowRatio, "median of 2, 3, 2.5")
	require.Equal(t, 2.0, *c.LatSlowRatioMin)
	require.Equal(t, 3.0, *c.LatSlowRatioMax)
	// One run is itself, without a spread.
	one := CombineRuns(runs[:1])
	require.Equal(t, runs[0], one)
	require.Nil(t, one.GbpsMin)
}

func TestBench_Repeat(t *testing.T) {
	cfg := loopback("write", 512, 200, 20)
	cfg.CompareTCP, cfg.Repeat = true, 3
	m := runJSON(t, cfg)
	require.Equal(t, 3.0, num(t, m, "repeat"))
	for _, k := range []string{"gbps", "lat_p50_us", "tcp_gbps", "tcp_lat_p50_us", "ratio", "lat_ratio"} {
		require.LessOrEqual(t, num(t, m, k+"_min"), num(t, m, k), k)
		require.GreaterOrEqual(t, num(t, m, k+"_max"), num(t, m, k), k)
	}
	checkRates(t, m, "", 512)
}

func TestBench_WarmUp(t *testing.T) {
	counted := &Config{LatIters: 1000}
	require.True(t, counted.warmingUp(99, time.Time{}, time.Time{}))
	require.False(t, counted.warmingUp(100, time.Time{}, time.Time{}))
	require.Equal(t, int64(1100), counted.latStopper(time.Now()).iters, "warm-up round trips come on top")
	require.Equal(t, 1, (&Config{LatIters: 10}).warmup())

	start := time.Now()
	timed := &Config{LatTimed: true, Duration: time.Second}
	require.True(t, timed.warmingUp(5, start, start.Add(50*time.Millisecond)))
	require.False(t, timed.warmingUp(5, start, start.Add(150*time.Millisecond)), "at most a tenth of the time")
	require.False(t, timed.warmingUp(100, start, start))
}
