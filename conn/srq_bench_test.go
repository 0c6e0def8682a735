package conn

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPingPongSRQ is BenchmarkPingPong with the server's queue pair
// bound to a shared receive queue, which the server reposts to: the Send
// path through an SRQ (take, place, complete, repost) in steady state.
func BenchmarkPingPongSRQ(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spd := NewPD()
	srq, err := spd.NewSRQ(SRQCaps{Depth: 16, MaxSGE: 1})
	require.NoError(b, err)
	scq := NewCQ(256)
	sqp, err := spd.NewQP(scq, QPCaps{SendDepth: 256, SRQ: srq})
	require.NoError(b, err)
	client := newEndpoint(b, QPCaps{SendDepth: 256, RecvDepth: 256})
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(b, err)
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()
	require.NoError(b, client.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(b, <-accepted)
	ln.Close()

	cbuf := client.register(b, 8, LocalWrite)
	sbufMR, err := spd.Register(make([]byte, 8), LocalWrite)
	require.NoError(b, err)
	ssgl, csgl := []SGE{sbufMR.SGE(0, 8)}, []SGE{cbuf.SGE(0, 8)}
	require.NoError(b, srq.PostRecv(RecvWR{SGL: ssgl}))
	require.NoError(b, client.qp.PostRecv(RecvWR{SGL: csgl}))
	// Closing the server's queue pair completes nothing (the SRQ keeps its
	// receive), so its Wait ends with this context.
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wcs := make([]WorkCompletion, 4)
		for {
			n, err := scq.Wait(sctx, wcs)
			if err != nil {
				return
			}
			for _, wc := range wcs[:n] {
				if wc.Status != WCSuccess {
					return
				}
				if wc.Op == WCRecv {
					srq.PostRecv(RecvWR{SGL: ssgl})
					sqp.PostSend(SendWR{Op: OpSend, SGL: ssgl})
				}
			}
		}
	}()
	wcs := make([]WorkCompletion, 4)
	b.ReportAllocs()
	b.ResetTimer()
	sw := startCost()
	for i := 0; i < b.N; i++ {
		if err := client.qp.PostSend(SendWR{Op: OpSend, SGL: csgl}); err != nil {
			b.Fatal(err)
		}
		for got := false; !got; {
			n, err := client.cq.Wait(context.Background(), wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:n] {
				if wc.Op == WCRecv {
					got = true
					client.qp.PostRecv(RecvWR{SGL: csgl})
				}
			}
		}
	}
	sw.report(b)
	b.StopTimer()
	client.qp.Close()
	sqp.Close()
	scancel()
	<-done
	require.NoError(b, srq.Close())
}

// BenchmarkIdleQPMemorySRQ is BenchmarkIdleQPMemory with every queue pair
// of both ends bound to one shared receive queue: what an idle queue pair
// costs when it has no receive ring of its own. Memory, not time: b.N is
// ignored.
func BenchmarkIdleQPMemorySRQ(b *testing.B) {
	const pairs = 250
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pd := NewPD()
	cq := NewCQ(16)
	srq, err := pd.NewSRQ(SRQCaps{})
	require.NoError(b, err)
	base := heapAndStacks()
	var qps []*QP
	for i := 0; i < 2*pairs; i++ {
		qp, err := pd.NewQP(cq, QPCaps{SRQ: srq})
		require.NoError(b, err)
		qps = append(qps, qp)
	}
	unconnected := heapAndStacks()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	for i := 0; i < pairs; i++ {
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(ctx, qps[2*i+1]) }()
		require.NoError(b, qps[2*i].Connect(ctx, "tcp", ln.Addr().String()))
		require.NoError(b, <-errc)
	}
	time.Sleep(100 * time.Millisecond) // let every goroutine park
	connected := heapAndStacks()
	n := float64(2 * pairs)
	b.ReportMetric(float64(connected-base)/n, "B/QP")
	b.ReportMetric(float64(unconnected-base)/n, "B/QP-unconnected")
	b.ReportMetric(float64(connected-unconnected)/n, "B/QP-connection")
	b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/QP")
	for _, qp := range qps {
		qp.Close()
	}
	require.NoError(b, srq.Close())
}
