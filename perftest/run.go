package perftest

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// measure runs one StepRun and prints its row.
func (s *session) measure(ctx context.Context, size int) error {
	var r Result
	var err error
	switch {
	case !s.s.Test.Latency() && s.role == Client:
		var bw BWReport
		bw, err = s.bwClient(ctx, size)
		r.BW = &bw
		s.proto.SetReport(bw)
	case s.s.Test == SendBW:
		var bw BWReport
		bw, err = s.bwServer(ctx, size)
		r.BW = &bw
	default:
		var lat LatReport
		lat, err = s.latency(ctx, size)
		r.Lat = &lat
	}
	if err != nil {
		return err
	}
	s.results = append(s.results, r)
	if r.BW != nil {
		writeBWRow(s.out, r.BW, s.s.ReportGbits)
	} else {
		writeLatRow(s.out, r.Lat)
	}
	return nil
}

// clock is a monotonic clock in nanoseconds.
var clockBase = time.Now()

func now() int64 { return int64(time.Since(clockBase)) }

// phases is the timing of a -D run (catch_alarm): a warm-up margin, the
// sampling window, a cool-down margin.
type phases struct {
	on                 bool
	sample, stop, end  int64
	sampling           bool
	sampleAt, sampleTo int64 // when sampling actually began and ended
}

func newPhases(st *settings, start int64) phases {
	if st.Duration == 0 {
		return phases{}
	}
	m, d := int64(st.margin), int64(st.Duration)
	return phases{on: true, sample: start + m, stop: start + d - m, end: start + d}
}

// at advances the phases to time t and reports whether the run is over.
func (p *phases) at(t int64) (over bool) {
	if !p.on {
		return false
	}
	if !p.sampling && p.sampleAt == 0 && t >= p.sample {
		p.sampling, p.sampleAt = true, t
	}
	if p.sampling && t >= p.stop {
		p.sampling, p.sampleTo = false, t
	}
	return t >= p.end
}

func (p *phases) window() time.Duration { return time.Duration(p.sampleTo - p.sampleAt) }

// next returns the next phase boundary after t.
func (p *phases) next(t int64) int64 {
	for _, b := range []int64{p.sample, p.stop, p.end} {
		if b > t {
			return b
		}
	}
	return t
}

// waiter waits on a completion queue without allocating.
type waiter struct {
	timer *time.Timer
}

// wait polls cq into wcs, and when it is empty waits for a completion,
// ctx, the end of qps' connections, or the deadline (0: none).
func (w *waiter) wait(ctx context.Context, cq *conn.CQ, wcs []conn.WorkCompletion, qps []*conn.QP, deadline int64) (int, error) {
	for {
		if n := cq.Poll(wcs); n > 0 {
			return n, nil
		}
		var tc <-chan time.Time
		if deadline != 0 {
			d := time.Duration(deadline - now())
			if d <= 0 {
				return 0, nil
			}
			if w.timer == nil {
				w.timer = time.NewTimer(d)
			} else {
				w.timer.Reset(d)
			}
			tc = w.timer.C
		}
		var done <-chan struct{}
		if len(qps) == 1 {
			done = qps[0].Done()
		}
		select {
		case <-cq.Ready():
		case <-tc:
			return cq.Poll(wcs), nil
		case <-done:
			// Outstanding work completes with errors once the queue pair
			// has flushed; take those first.
			if n := cq.Poll(wcs); n > 0 {
				return n, nil
			}
			return 0, qpFailed(qps[0], "waiting for completions")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if tc != nil && !w.timer.Stop() {
			<-w.timer.C
		}
	}
}

// spin waits until cond holds, yielding between checks: the waits on
// memory the peer's Writes fill (perftest busy-polls them). After a
// second without progress it checks once a millisecond: a wait that long
// is no latency to measure, and the CPU is shared.
func spin(ctx context.Context, qp *conn.QP, cond func() bool, deadline int64) error {
	start := now()
	slow := false
	for i := 0; !cond(); i++ {
		if !slow && i&255 != 255 {
			runtime.Gosched()
			continue
		}
		select {
		case <-qp.Done():
			// The peer may have written and then closed: what it
			// placed before it closed counts.
			if cond() {
				return nil
			}
			return qpFailed(qp, "waiting for the peer's Write")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		t := now()
		if deadline != 0 && t >= deadline {
			return nil
		}
		if slow = t-start > int64(time.Second); slow {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// completion checks one work completion.
func completion(wc *conn.WorkCompletion, what string) error {
	if err := wc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTest, what, err)
	}
	return nil
}

// inc is perftest's INC: the address step between messages, at least a
// cache line.
func inc(size, cacheLine int) int {
	if size > cacheLine {
		return (size + cacheLine - 1) / cacheLine * cacheLine
	}
	return cacheLine
}

// cycleOffset is the buffer offset of message k of a bandwidth run:
// perftest walks its cycle buffer in INC steps (increase_loc_addr,
// increase_rem_addr) when a message fits half of it, and otherwise uses
// the start of the buffer every time.
func cycleOffset(k uint64, size, cycle, cacheLine int) int {
	if size > cycle/2 {
		return 0
	}
	step := inc(size, cacheLine)
	return int(k%uint64(cycle/step)) * step
}
