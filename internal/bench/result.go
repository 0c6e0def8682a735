package bench

import (
	"cmp"
	"slices"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/units"
)

// Result is what a run measured, as the JSON object bench --json prints.
type Result struct {
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
	// LatSlowPct is the percentage of round trips over twice the median
	// (units.SlowShare), TCPLatSlowPct the raw TCP ping-pong's.
	LatSlowPct float64 `json:"lat_slow_pct"`
	Setup      string  `json:"setup"`
	// TLS says the connections ran inside TLS, and the raw TCP figures
	// are those of crypto/tls streams (Config.TLS).
	TLS bool `json:"tls,omitempty"`
	// QPs is the number of queue pairs (and of raw TCP connections) the
	// bandwidth phase streamed over at once; the figures above are their
	// sum over the phase's time.
	QPs int `json:"qps"`
	// What the ends of every connection of the run received: FPDUs, those
	// of them whose CRC was checked (every FPDU of a connection that
	// negotiated the CRC), and CRC errors (conn.QP.Stats; the server's
	// from its report).
	FPDUsReceived   uint64 `json:"fpdus_received"`
	CRCCheckedFPDUs uint64 `json:"crc_checked_fpdus"`
	CRCErrors       uint64 `json:"crc_errors"`
	// LatCPUus is the CPU time (user and system) this process spent per
	// round trip of the latency phase; LatCPUScope says whose: both sides
	// in a loopback run, the client's otherwise, and then ServerLatCPUus
	// is the server's (its process over the session).
	LatCPUus       *float64 `json:"lat_cpu_us_per_rt,omitempty"`
	LatCPUScope    string   `json:"lat_cpu_scope,omitempty"`
	ServerLatCPUus *float64 `json:"server_lat_cpu_us_per_rt,omitempty"`

	TCPMessages   *int64   `json:"tcp_messages,omitempty"`
	TCPBytes      *int64   `json:"tcp_bytes,omitempty"`
	TCPSeconds    *float64 `json:"tcp_seconds,omitempty"`
	TCPGbps       *float64 `json:"tcp_gbps,omitempty"`
	TCPMsgRate    *float64 `json:"tcp_msg_rate,omitempty"`
	TCPLatP50us   *float64 `json:"tcp_lat_p50_us,omitempty"`
	TCPLatP99us   *float64 `json:"tcp_lat_p99_us,omitempty"`
	TCPLatSlowPct *float64 `json:"tcp_lat_slow_pct,omitempty"`
	// TCPLatCPUus is the CPU time per round trip of the raw TCP ping-pong
	// (both ends: they run in this process).
	TCPLatCPUus *float64 `json:"tcp_lat_cpu_us_per_rt,omitempty"`
	// CPUnsPerOp is the CPU time (user and system) both endpoints spent
	// per round trip of the latency phase, in nanoseconds: the process's
	// in a loopback run, the client's plus the server's between processes
	// (none without the server's report). TCPCPUnsPerOp is raw TCP's (both
	// ends in this process), CPURatio the one over the other, measured in
	// the same run.
	CPUnsPerOp    *float64 `json:"cpu_ns_per_op,omitempty"`
	TCPCPUnsPerOp *float64 `json:"tcp_cpu_ns_per_op,omitempty"`
	CPURatio      *float64 `json:"cpu_ratio,omitempty"`
	// LatSlowRatio is LatSlowPct / TCPLatSlowPct: 1 where neither had a
	// slowed round trip, absent where only iwarp-go had (shareRatio).
	LatSlowRatio *float64 `json:"lat_slow_ratio,omitempty"`
	// The raw TCP + CRC baseline (CRC rows): the stream with CRC32c
	// computed per 64 KiB and checked on both ends.
	TCPCRCGbps    *float64 `json:"tcp_crc_gbps,omitempty"`
	TCPCRCMsgRate *float64 `json:"tcp_crc_msg_rate,omitempty"`
	// The bandwidth phases in CPU time per MiB moved (user and system, both
	// ends: loopback runs only, where one process holds them), iwarp-go's,
	// raw TCP's and raw TCP + CRC's of the same run, and iwarp-go's over
	// each baseline's. Unlike the Gb/s ratios these do not move when the
	// host steals a core: where bandwidth is bound by CPU, a CPU ratio of
	// r is a bandwidth ratio of 1/r on an idle machine.
	BwCPUnsPerMiB       *float64 `json:"bw_cpu_ns_per_mib,omitempty"`
	TCPBwCPUnsPerMiB    *float64 `json:"tcp_bw_cpu_ns_per_mib,omitempty"`
	TCPCRCBwCPUnsPerMiB *float64 `json:"tcp_crc_bw_cpu_ns_per_mib,omitempty"`
	BwCPURatio          *float64 `json:"bw_cpu_ratio,omitempty"`
	CRCBwCPURatio       *float64 `json:"crc_bw_cpu_ratio,omitempty"`
	// Ratio is ours / raw TCP bandwidth, TCPCRCRatio ours / raw TCP + CRC
	// bandwidth; LatRatio ours / raw TCP median latency, LatP99Ratio the
	// same of the 99th percentiles.
	Ratio       *float64 `json:"ratio,omitempty"`
	TCPCRCRatio *float64 `json:"tcp_crc_ratio,omitempty"`
	LatRatio    *float64 `json:"lat_ratio,omitempty"`
	LatP99Ratio *float64 `json:"lat_p99_ratio,omitempty"`

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
	TCPCRCGbpsMin  *float64 `json:"tcp_crc_gbps_min,omitempty"`
	TCPCRCGbpsMax  *float64 `json:"tcp_crc_gbps_max,omitempty"`
	TCPCRCRatioMin *float64 `json:"tcp_crc_ratio_min,omitempty"`
	TCPCRCRatioMax *float64 `json:"tcp_crc_ratio_max,omitempty"`
	LatP99RatioMin *float64 `json:"lat_p99_ratio_min,omitempty"`
	LatP99RatioMax *float64 `json:"lat_p99_ratio_max,omitempty"`

	// The spread of the decidable measures' ratios over the runs.
	CPURatioMin      *float64 `json:"cpu_ratio_min,omitempty"`
	CPURatioMax      *float64 `json:"cpu_ratio_max,omitempty"`
	LatSlowRatioMin  *float64 `json:"lat_slow_ratio_min,omitempty"`
	LatSlowRatioMax  *float64 `json:"lat_slow_ratio_max,omitempty"`
	BwCPURatioMin    *float64 `json:"bw_cpu_ratio_min,omitempty"`
	BwCPURatioMax    *float64 `json:"bw_cpu_ratio_max,omitempty"`
	CRCBwCPURatioMin *float64 `json:"crc_bw_cpu_ratio_min,omitempty"`
	CRCBwCPURatioMax *float64 `json:"crc_bw_cpu_ratio_max,omitempty"`
}

// phaseResult is what a bandwidth phase measured.
type phaseResult struct {
	messages int64
	bytes    int64
	elapsed  time.Duration
	// cpu is the process's CPU time over the phase, where it holds both
	// ends (timedTogether); cpuOK says whether it was measured.
	cpu   time.Duration
	cpuOK bool
}

// cpuPerMiB is the phase's CPU time per MiB moved, in nanoseconds, or nil.
func (p phaseResult) cpuPerMiB() *float64 {
	if !p.cpuOK || p.bytes <= 0 {
		return nil
	}
	return ptr(float64(p.cpu) / (float64(p.bytes) / (1 << 20)))
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fillPhase(bw phaseResult, lat []time.Duration) (msgs, bytes int64, secs, rate, msgRate, p50, p99 float64) {
	secs = bw.elapsed.Seconds()
	rate = units.Gbps(bw.bytes, bw.elapsed)
	if secs > 0 {
		msgRate = float64(bw.messages) / secs
	}
	l50, l99 := units.Latency(lat)
	return bw.messages, bw.bytes, secs, rate, msgRate, micros(l50), micros(l99)
}

// CombineRuns summarises repeated runs by their medians: the bandwidth
// figures (messages, bytes, seconds, rates) are those of the run with the
// median bandwidth, so that they stay consistent with each other; each
// latency figure and each ratio is the median over the runs (a ratio
// pairs a run with the baseline measured right after it, under the same
// load). The spread is reported as the minimum and maximum.
func CombineRuns(runs []Result) Result {
	if len(runs) == 1 {
		return runs[0]
	}
	res := medianBy(runs, func(r *Result) float64 { return r.Gbps })
	res.Repeat = len(runs)
	res.LatP50us, res.LatP99us = medianOf(runs, func(r *Result) *float64 { return &r.LatP50us }), medianOf(runs, func(r *Result) *float64 { return &r.LatP99us })
	res.LatSlowPct = medianOf(runs, func(r *Result) *float64 { return &r.LatSlowPct })
	res.GbpsMin, res.GbpsMax = spread(runs, func(r *Result) *float64 { return &r.Gbps })
	res.LatP50usMin, res.LatP50usMax = spread(runs, func(r *Result) *float64 { return &r.LatP50us })
	if runs[0].TCPGbps != nil {
		t := medianBy(runs, func(r *Result) float64 { return *r.TCPGbps })
		res.TCPMessages, res.TCPBytes, res.TCPSeconds, res.TCPGbps, res.TCPMsgRate = t.TCPMessages, t.TCPBytes, t.TCPSeconds, t.TCPGbps, t.TCPMsgRate
		res.TCPGbpsMin, res.TCPGbpsMax = spread(runs, func(r *Result) *float64 { return r.TCPGbps })
		res.Ratio = ptr(medianOf(runs, func(r *Result) *float64 { return r.Ratio }))
		res.RatioMin, res.RatioMax = spread(runs, func(r *Result) *float64 { return r.Ratio })
	}
	if runs[0].TCPLatP50us != nil {
		res.TCPLatP50us = ptr(medianOf(runs, func(r *Result) *float64 { return r.TCPLatP50us }))
		res.TCPLatP99us = ptr(medianOf(runs, func(r *Result) *float64 { return r.TCPLatP99us }))
		res.TCPLatSlowPct = ptr(medianOf(runs, func(r *Result) *float64 { return r.TCPLatSlowPct }))
		res.TCPLatP50usMin, res.TCPLatP50usMax = spread(runs, func(r *Result) *float64 { return r.TCPLatP50us })
	}
	if runs[0].LatRatio != nil {
		res.LatRatio = ptr(medianOf(runs, func(r *Result) *float64 { return r.LatRatio }))
		res.LatRatioMin, res.LatRatioMax = spread(runs, func(r *Result) *float64 { return r.LatRatio })
	}
	res.LatP99Ratio, res.LatP99RatioMin, res.LatP99RatioMax = medianSpread(runs, func(r *Result) *float64 { return r.LatP99Ratio })
	res.TCPCRCGbps, res.TCPCRCGbpsMin, res.TCPCRCGbpsMax = medianSpread(runs, func(r *Result) *float64 { return r.TCPCRCGbps })
	res.TCPCRCMsgRate, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.TCPCRCMsgRate })
	res.TCPCRCRatio, res.TCPCRCRatioMin, res.TCPCRCRatioMax = medianSpread(runs, func(r *Result) *float64 { return r.TCPCRCRatio })
	res.LatCPUus, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.LatCPUus })
	res.ServerLatCPUus, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.ServerLatCPUus })
	res.TCPLatCPUus, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.TCPLatCPUus })
	res.CPUnsPerOp, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.CPUnsPerOp })
	res.TCPCPUnsPerOp, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.TCPCPUnsPerOp })
	res.CPURatio, res.CPURatioMin, res.CPURatioMax = medianSpread(runs, func(r *Result) *float64 { return r.CPURatio })
	res.LatSlowRatio, res.LatSlowRatioMin, res.LatSlowRatioMax = medianSpread(runs, func(r *Result) *float64 { return r.LatSlowRatio })
	res.BwCPUnsPerMiB, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.BwCPUnsPerMiB })
	res.TCPBwCPUnsPerMiB, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.TCPBwCPUnsPerMiB })
	res.TCPCRCBwCPUnsPerMiB, _, _ = medianSpread(runs, func(r *Result) *float64 { return r.TCPCRCBwCPUnsPerMiB })
	res.BwCPURatio, res.BwCPURatioMin, res.BwCPURatioMax = medianSpread(runs, func(r *Result) *float64 { return r.BwCPURatio })
	res.CRCBwCPURatio, res.CRCBwCPURatioMin, res.CRCBwCPURatioMax = medianSpread(runs, func(r *Result) *float64 { return r.CRCBwCPURatio })
	return res
}

// medianSpread is the median, smallest and largest of a figure the runs
// may lack: all nil if none has it.
func medianSpread(runs []Result, get func(*Result) *float64) (med, lo, hi *float64) {
	lo, hi = spread(runs, get)
	if lo == nil {
		return nil, nil, nil
	}
	return ptr(medianOf(runs, get)), lo, hi
}

func ptr(v float64) *float64 { return &v }

// medianBy returns the run with the median key (nearest rank).
func medianBy(runs []Result, key func(*Result) float64) Result {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(key(&runs[a]), key(&runs[b])) })
	return runs[idx[(len(idx)+1)/2-1]]
}

// medianOf is the nearest-rank median of a figure over the runs.
func medianOf(runs []Result, get func(*Result) *float64) float64 {
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

func spread(runs []Result, get func(*Result) *float64) (lo, hi *float64) {
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
