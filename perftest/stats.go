package perftest

import (
	"math"
	"slices"
	"time"
)

// The results are computed the way perftest computes them
// (print_report_bw and print_report_lat in perftest_parameters.c), from
// time stamps in nanoseconds of a monotonic clock instead of CPU cycles;
// nothing needs calibrating.

// Report units (format_factor): MB/s are 2^20 bytes a second; Gb/s 10^9
// bits a second.
const (
	unitMB    = 0x100000
	unitGbits = 125000000
)

func unitOf(gbits bool) float64 {
	if gbits {
		return unitGbits
	}
	return unitMB
}

// bwTimes are the time stamps of a bandwidth run: the time each message
// was posted and the time of each signalled completion, by the index of
// the last message it covers (perftest's tposted and tcompleted). With
// noPeak only the first posting and the end are kept.
type bwTimes struct {
	posted    []int64
	completed []int64 // 0 where no completion was signalled
	noPeak    bool
	start     int64 // noPeak: first post (or, for a receiver, first arrival)
	end       int64 // noPeak: last completion
}

// bwResult is print_report_bw: iters messages of size bytes.
func bwResult(size int, iters uint64, t *bwTimes, gbits bool) BWReport {
	unit := unitOf(gbits)
	r := BWReport{Size: uint64(size), Iters: iters}
	var total float64
	if t.noPeak || len(t.posted) == 0 {
		total = float64(t.end - t.start)
	} else {
		n := int(iters)
		total = float64(t.completed[n-1] - t.posted[0])
		// The peak is the best per-message time over every stretch from
		// a posting to a later signalled completion.
		best := math.Inf(1)
		var sig []int
		for j := 0; j < n; j++ {
			if t.completed[j] != 0 {
				sig = append(sig, j)
			}
		}
		for i := 0; i < n; i++ {
			k, _ := slices.BinarySearch(sig, i)
			for _, j := range sig[k:] {
				if d := float64(t.completed[j]-t.posted[i]) / float64(j-i+1); d < best {
					best = d
				}
			}
		}
		if best > 0 && !math.IsInf(best, 1) {
			r.BWPeak = float64(size) / (best / 1e9 * unit)
		}
	}
	if total <= 0 {
		return r
	}
	secs := total / 1e9
	r.BWAvg = float64(size) * float64(iters) / (secs * unit)
	r.MsgRate = float64(iters) / (secs * 1e6)
	return r
}

// bwDurationResult is print_report_bw of a -D run: iters messages of size
// bytes completed in the sampling window.
func bwDurationResult(size int, iters uint64, window time.Duration, gbits bool) BWReport {
	r := BWReport{Size: uint64(size), Iters: iters}
	if window <= 0 {
		return r
	}
	secs := window.Seconds()
	r.BWAvg = float64(size) * float64(iters) / (secs * unitOf(gbits))
	r.MsgRate = float64(iters) / (secs * 1e6)
	return r
}

// LatReport is one row of a latency test's result, in microseconds: the
// spread of one-way times (half a round trip) for Write and Send, of whole
// round trips for Read.
type LatReport struct {
	Size  uint64
	Iters uint64
	// Duration runs (-D) report only TAvg and TPS.
	Duration bool
	TMin     float64
	TMax     float64
	TTypical float64 // the median
	TAvg     float64
	TStdev   float64
	P99      float64
	P999     float64
	TPS      float64 // transactions per second, duration runs
}

// latMeasureTail is LAT_MEASURE_TAIL: the slowest samples perftest drops.
const latMeasureTail = 2

// latResult is print_report_lat over the posting times of iters messages
// (at least MinIters). rttFactor is 2 when a sample is a round trip of two
// messages (Write, Send) and 1 for Read. It keeps perftest's arithmetic,
// including its standard deviation over whole microseconds.
func latResult(size int, posted []int64, rttFactor int) LatReport {
	iters := len(posted)
	r := LatReport{Size: uint64(size), Iters: uint64(iters)}
	cnt := iters - 1
	if cnt-latMeasureTail < 1 {
		return r
	}
	delta := make([]int64, cnt)
	for i := range delta {
		delta[i] = posted[i+1] - posted[i]
	}
	slices.Sort(delta)
	cnt -= latMeasureTail
	// get_median
	var median int64
	if (cnt-1)%2 != 0 {
		median = (delta[cnt/2] + delta[cnt/2-1]) / 2
	} else {
		median = delta[cnt/2]
	}
	q := 1000 * float64(rttFactor) // ns per µs, times the RTT factor
	sum := 0.0
	for _, d := range delta[:cnt] {
		sum += float64(d) / q
	}
	avg := sum / float64(cnt)
	var stdevSum float64
	for _, d := range delta[:cnt] {
		v := int64(avg - float64(d)/q) // C's int conversion truncates
		stdevSum += float64(v * v)
	}
	r.TMin = float64(delta[0]) / q
	r.TMax = float64(delta[cnt]) / q
	r.TTypical = float64(median) / q
	r.TAvg = avg
	r.TStdev = math.Sqrt(stdevSum / float64(cnt))
	r.P99 = float64(delta[int(math.Ceil(float64(cnt)*0.99))]) / q
	r.P999 = float64(delta[int(math.Ceil(float64(cnt)*0.999))]) / q
	return r
}

// latDurationResult is print_report_lat_duration: iters round trips in
// the sampling window.
func latDurationResult(size int, iters uint64, window time.Duration, rttFactor int) LatReport {
	r := LatReport{Size: uint64(size), Iters: iters, Duration: true}
	if iters == 0 || window <= 0 {
		return r
	}
	us := float64(window) / 1000
	r.TAvg = us / float64(rttFactor) / float64(iters)
	r.TPS = float64(iters) / window.Seconds()
	return r
}
