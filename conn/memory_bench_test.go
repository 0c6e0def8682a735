package conn

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// heapAndStacks is the heap in use by live objects plus goroutine stacks,
// after a GC: what the queue pairs cost the process.
func heapAndStacks() uint64 {
	h, s := heapStacks()
	return h + s
}

func heapStacks() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// BenchmarkIdleQPMemory reports what an idle connected queue pair with
// default QPCaps costs (one end of a connection: heap in use plus goroutine
// stacks, divided by the queue pairs), with the breakdown into the queue
// pair itself (its rings) and its connection. Memory, not time: b.N is
// ignored.
func BenchmarkIdleQPMemory(b *testing.B) {
	const pairs = 250
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pd := NewPD()
	cq := NewCQ(16)
	base := heapAndStacks()
	_, stacks0 := heapStacks()
	var qps []*QP
	for i := 0; i < 2*pairs; i++ {
		qp, err := pd.NewQP(cq, QPCaps{})
		if err != nil {
			b.Fatal(err)
		}
		qps = append(qps, qp)
	}
	unconnected := heapAndStacks()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < pairs; i++ {
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(ctx, qps[2*i+1]) }()
		if err := qps[2*i].Connect(ctx, "tcp", ln.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // let every goroutine park
	connected := heapAndStacks()
	_, stacks1 := heapStacks()
	n := float64(2 * pairs)
	b.ReportMetric(float64(connected-base)/n, "B/QP")
	b.ReportMetric(float64(unconnected-base)/n, "B/QP-unconnected")
	b.ReportMetric(float64(connected-unconnected)/n, "B/QP-connection")
	b.ReportMetric(float64(stacks1-stacks0)/n, "B/QP-stacks")
	b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/QP")
	for _, qp := range qps {
		qp.Close()
	}
}
