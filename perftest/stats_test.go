package perftest

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func us(v ...float64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x * 1000)
	}
	return out
}

// TestLatResultArithmetic: print_report_lat's steps on a worked example:
// intervals 4, 2, 8, 6, 10, 12 µs between seven postings, halved (a round
// trip of two messages), the two slowest dropped.
func TestLatResultArithmetic(t *testing.T) {
	r := latResult(64, us(0, 4, 6, 14, 20, 30, 42), 2)
	assert.Equal(t, uint64(7), r.Iters)
	assert.InDelta(t, 1.0, r.TMin, 1e-9)
	assert.InDelta(t, 2.5, r.TTypical, 1e-9, "the mean of the middle two of four")
	assert.InDelta(t, 2.5, r.TAvg, 1e-9)
	// perftest squares whole microseconds: int(2.5-1)=1, int(0.5)=0,
	// int(-0.5)=0, int(-1.5)=-1.
	assert.InDelta(t, math.Sqrt(2.0/4), r.TStdev, 1e-9)
	assert.InDelta(t, 5.0, r.TMax, 1e-9, "delta[measure_cnt]: the first dropped sample")
	assert.InDelta(t, 5.0, r.P99, 1e-9)
	assert.InDelta(t, 5.0, r.P999, 1e-9)

	odd := latResult(64, us(0, 1, 3, 6, 10, 15, 21, 28), 1) // five kept: 1..5
	assert.InDelta(t, 3.0, odd.TTypical, 1e-9, "the middle one of five")

	assert.Zero(t, latResult(8, us(0, 1, 2), 2).TAvg, "too few samples")
}

func TestLatDurationResult(t *testing.T) {
	r := latDurationResult(2, 1000, 2*time.Second, 2)
	assert.True(t, r.Duration)
	assert.InDelta(t, 1000.0, r.TAvg, 1e-9, "2 s over 1000 round trips, halved")
	assert.InDelta(t, 500.0, r.TPS, 1e-9)
}

// TestBWResultPeak: four messages, every second one signalled: the peak
// is the best time per message over every posting-to-completion stretch.
func TestBWResultPeak(t *testing.T) {
	tm := &bwTimes{posted: us(0, 1, 2, 3), completed: []int64{0, 10000, 0, 14000}}
	r := bwResult(1<<20, 4, tm, false)
	assert.InDelta(t, 4/14e-6, r.BWAvg, 1e-3, "4 MiB in 14 µs, in MB/s")
	assert.InDelta(t, 1/3.5e-6, r.BWPeak, 1e-3, "posting 0 to completion 3: 3.5 µs a message")
	assert.InDelta(t, 4/14e-6/1e6, r.MsgRate, 1e-9)
	g := bwResult(1<<20, 4, tm, true)
	assert.InDelta(t, r.BWAvg*unitMB/unitGbits, g.BWAvg, 1e-6)

	np := bwResult(100, 10, &bwTimes{noPeak: true, start: 0, end: 1e9}, false)
	assert.Zero(t, np.BWPeak, "no peak without the per-message times")
	assert.InDelta(t, 1000.0/unitMB, np.BWAvg, 1e-12)
	assert.Zero(t, bwResult(100, 10, &bwTimes{noPeak: true}, false).BWAvg, "no time, no rate")

	d := bwDurationResult(4096, 1000, time.Second, true)
	assert.InDelta(t, 4096*1000*8/1e9, d.BWAvg, 1e-12)
}

func TestCycleOffset(t *testing.T) {
	assert.Equal(t, 0, cycleOffset(0, 64, 4096, 64))
	assert.Equal(t, 64*63, cycleOffset(63, 64, 4096, 64))
	assert.Equal(t, 0, cycleOffset(64, 64, 4096, 64), "wraps after a cycle buffer")
	assert.Equal(t, 128, cycleOffset(1, 100, 4096, 64), "a step is whole cache lines")
	assert.Equal(t, 2048, cycleOffset(1, 2048, 4096, 64), "half the buffer still walks")
	assert.Equal(t, 0, cycleOffset(1, 2049, 4096, 64), "larger messages use the start")
	assert.Equal(t, 0, cycleOffset(7, 65536, 4096, 64))
	assert.Equal(t, 4096, bufferLen(100, 4096, 64))
	assert.Equal(t, 65536+64, bufferLen(65537, 4096, 64))
}

func TestCreditWindow(t *testing.T) {
	assert.True(t, windowOpen(0, 0, 200))
	assert.True(t, windowOpen(198, 0, 200), "199 in flight")
	assert.False(t, windowOpen(199, 0, 200), "never rx_depth beyond the credit")
	assert.True(t, windowOpen(199, 66, 200))
	assert.True(t, windowOpen(0, 200, 200), "the previous size's last credit counts as none")
	assert.False(t, windowOpen(199, 200, 200))
	assert.True(t, creditDue(1, 2), "rx_depth 2: a credit after every receive")
	assert.False(t, creditDue(1, 512))
	assert.True(t, creditDue(170, 512))
	assert.True(t, creditDue(512, 512))
}

func TestPhases(t *testing.T) {
	st := &settings{Config: Config{Duration: 8 * time.Second}, margin: 2 * time.Second}
	p := newPhases(st, 0)
	s := int64(time.Second)
	assert.False(t, p.at(1*s))
	assert.False(t, p.sampling)
	assert.Equal(t, 2*s, p.next(1*s))
	assert.False(t, p.at(2*s))
	assert.True(t, p.sampling)
	assert.False(t, p.at(6*s))
	assert.False(t, p.sampling)
	assert.True(t, p.at(8*s))
	assert.Equal(t, 4*time.Second, p.window())
	assert.False(t, (&phases{}).at(1<<62), "iteration runs have no phases")
}
