package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// formatBytes prints a byte count in binary units: "64 B", "4 KiB",
// "1.5 MiB".
func formatBytes(n int64) string {
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

// gbps is the bit rate of n bytes in d, in gigabits per second.
func gbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) * 8 / d.Seconds() / 1e9
}

// formatRate prints a bit rate chosen for its size: "12.3 Gb/s", "850 Mb/s".
func formatRate(n int64, d time.Duration) string {
	g := gbps(n, d)
	if g >= 1 {
		return fmt.Sprintf("%.2f Gb/s", g)
	}
	return fmt.Sprintf("%.1f Mb/s", g*1000)
}

// formatDuration prints a duration with three significant digits in µs,
// ms or s.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted samples
// by the nearest-rank method: the smallest sample with at least p percent
// of the samples at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencySummary sorts samples in place and returns their median and 99th
// percentile.
func latencySummary(samples []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(samples)
	return percentile(samples, 50), percentile(samples, 99)
}
