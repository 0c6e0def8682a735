package conn

import (
	"context"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// BenchmarkIdleWaitingQPs is what idle queue pairs cost while a goroutine
// of each waits in CQ.Wait (one CQ per queue pair, so that the Wait
// receives and its receiver goroutine stands by): idleWaitPairs
// connections, both ends waiting, after one message each way that came
// while the first Wait was under way. An op is 10 ms of that idleness;
// cpu-µs/s/QP is the process's CPU time per second of it, per queue pair.
func BenchmarkIdleWaitingQPs(b *testing.B) {
	const idleWaitPairs = 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{}, 2*idleWaitPairs)
	var eps []*endpoint
	for range idleWaitPairs {
		c, s := connectPair(b, pairConfig{})
		pair := []*endpoint{c, s}
		bufs := make([]*MR, 2)
		for i, ep := range pair {
			bufs[i] = ep.register(b, 8, LocalWrite)
			if err := ep.qp.PostRecv(RecvWR{SGL: []SGE{bufs[i].SGE(0, 8)}}); err != nil {
				b.Fatal(err)
			}
			go func() {
				defer func() { done <- struct{}{} }()
				var wc [1]WorkCompletion
				for ctx.Err() == nil {
					ep.cq.Wait(ctx, wc[:])
				}
			}()
		}
		for i, ep := range pair {
			if err := ep.qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{bufs[i].SGE(0, 8)}}); err != nil {
				b.Fatal(err)
			}
		}
		eps = append(eps, pair...)
	}
	time.Sleep(200 * time.Millisecond) // every Wait holds its socket
	b.ResetTimer()
	c := testutil.StartCost()
	start := time.Now()
	time.Sleep(time.Duration(b.N) * 10 * time.Millisecond) // one sleep: a wake-up per op would cost more than the queue pairs
	if cpu, ok := c.CPUSince(); ok {
		b.ReportMetric(float64(cpu.Microseconds())/time.Since(start).Seconds()/float64(len(eps)), "cpu-µs/s/QP")
	}
	b.StopTimer()
	cancel()
	for range eps {
		<-done
	}
}
