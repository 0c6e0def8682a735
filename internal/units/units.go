// Package units reads and prints the sizes, rates and durations that
// iwarp-peer's commands take and report.
package units

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseSize reads a byte count with an optional binary suffix (64, 4k,
// 4KiB, 1m, 1MiB, 1g, 1GiB, 8b; any case) from 0 to max. Callers that need
// at least one byte check for 0 themselves.
func ParseSize(s string, max int) (int, error) {
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
	if err != nil || n < 0 || n > max/mult {
		return 0, fmt.Errorf("size %q: want a byte count from 1 to %d, with an optional k/KiB, m/MiB or g/GiB suffix", s, max)
	}
	return n * mult, nil
}

// Bytes prints a byte count in binary units: "64 B", "4 KiB", "1.5 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), "B"
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v /= unit
		suffix = s
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), suffix)
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// Gbps is the bit rate of n bytes in d, in gigabits per second.
func Gbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) * 8 / d.Seconds() / 1e9
}

// Rate prints the bit rate of n bytes in d in a unit chosen for its size:
// "12.30 Gb/s", "850.0 Mb/s".
func Rate(n int64, d time.Duration) string {
	g := Gbps(n, d)
	if g >= 1 {
		return fmt.Sprintf("%.2f Gb/s", g)
	}
	return fmt.Sprintf("%.1f Mb/s", g*1000)
}

// Duration prints a duration with three significant digits in µs, ms or s.
func Duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted samples
// by the nearest-rank method: the smallest sample with at least p percent
// of the samples at or below it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// SlowShare returns the percentage of sorted samples longer than twice
// their median. Where a few round trips in a hundred are slowed by the
// host (a preempted thread, a woken CPU), the 99th percentile of a run
// lands among them or below them by small differences of that share, and
// jumps between runs; the share itself says which side of that line a
// run was on, and whether the slow round trips are a stack's or the
// machine's.
func SlowShare(sorted []time.Duration) float64 {
	if len(sorted) == 0 {
		return 0
	}
	limit := 2 * Percentile(sorted, 50)
	i, _ := slices.BinarySearch(sorted, limit+1)
	return 100 * float64(len(sorted)-i) / float64(len(sorted))
}

// Latency sorts samples in place and returns their median and 99th
// percentile.
func Latency(samples []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(samples)
	return Percentile(samples, 50), Percentile(samples, 99)
}
