package units

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	const max = 256 << 20
	for in, want := range map[string]int{
		"64": 64, "4k": 4096, "4KiB": 4096, "64K": 65536, "1m": 1 << 20, "1M": 1 << 20, "1MiB": 1 << 20,
		"256MiB": 256 << 20, "8 B": 8, "0": 0,
	} {
		got, err := ParseSize(in, max)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1.5m", "1.5k", "1TiB", "257m", "k", "4g", "lots"} {
		_, err := ParseSize(in, max)
		require.Error(t, err, in)
	}
	got, err := ParseSize("16m", 16<<20)
	require.NoError(t, err)
	require.Equal(t, 16<<20, got)
	_, err = ParseSize("16777217", 16<<20)
	require.ErrorContains(t, err, `size "16777217": want a byte count from 1 to 16777216`)
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(101-i)) // reversed: Latency sorts
	}
	p50, p99 := Latency(s)
	require.Equal(t, time.Duration(50), p50)
	require.Equal(t, time.Duration(99), p99)
	require.Equal(t, time.Duration(100), Percentile(s, 100))
	require.Equal(t, time.Duration(1), Percentile(s, 0.5))
	require.Equal(t, time.Duration(7), Percentile([]time.Duration{7}, 99))
	require.Equal(t, time.Duration(0), Percentile(nil, 50))
	// Nearest rank on 3 samples: the median is the second.
	p50, _ = Latency([]time.Duration{30, 10, 20})
	require.Equal(t, time.Duration(20), p50)
}

func TestSlowShare(t *testing.T) {
	// Median 10: 20 is not over twice it, 21 and 40 are.
	s := []time.Duration{9, 10, 10, 10, 10, 10, 11, 20, 21, 40}
	require.InDelta(t, 20.0, SlowShare(s), 1e-9)
	require.Equal(t, 0.0, SlowShare([]time.Duration{5, 5, 5}))
	require.Equal(t, 0.0, SlowShare(nil))
	require.InDelta(t, 100.0/3, SlowShare([]time.Duration{1, 2, 5}), 1e-9, "median 2, one over 4")
}

func TestUnits(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 64: "64 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 20: "1 MiB", 130 << 20: "130 MiB", 3 << 30: "3 GiB"} {
		require.Equal(t, want, Bytes(n))
	}
	require.InDelta(t, 8.0, Gbps(1e9, time.Second), 1e-9)
	require.Equal(t, 0.0, Gbps(1, 0))
	require.Equal(t, "8.00 Gb/s", Rate(1e9, time.Second))
	require.Equal(t, "8.0 Mb/s", Rate(1e6, time.Second))
	require.Equal(t, "12.5 µs", Duration(12500*time.Nanosecond))
	require.Equal(t, "1.50 ms", Duration(1500*time.Microsecond))
	require.Equal(t, "2.00 s", Duration(2*time.Second))
	require.False(t, math.IsNaN(Gbps(0, time.Second)))
}
