package conn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// handlerPair connects two queue pairs whose CQs hand completions to
// handlers: the server's echoes every message it receives from inside its
// handler (re-posting the receive and posting the reply there).
func handlerPair(t testing.TB, onClient func(*WorkCompletion)) (client, server *endpoint) {
	t.Helper()
	var sqp *QP
	var sbuf *MR
	scq := NewCQ(64, WithCompletionHandler(func(wc *WorkCompletion) {
		if wc.Status != WCSuccess || wc.Op != WCRecv {
			return
		}
		sqp.PostRecv(RecvWR{ID: wc.ID, SGL: []SGE{sbuf.SGE(int(wc.ID)*8, 8)}})
		sqp.PostSend(SendWR{ID: wc.ID, Op: OpSend, SGL: []SGE{sbuf.SGE(int(wc.ID)*8, int(wc.ByteLen))}})
	}))
	ccq := NewCQ(64, WithCompletionHandler(onClient))
	client = &endpoint{pd: NewPD(), cq: ccq}
	server = &endpoint{pd: NewPD(), cq: scq}
	var err error
	client.qp, err = client.pd.NewQP(ccq, QPCaps{})
	require.NoError(t, err)
	server.qp, err = server.pd.NewQP(scq, QPCaps{})
	require.NoError(t, err)
	sqp = server.qp
	sbuf = server.register(t, 64, LocalWrite)
	for i := 0; i < 4; i++ {
		require.NoError(t, sqp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{sbuf.SGE(i*8, 8)}}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server.qp) }()
	require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)
	return client, server
}

// TestCompletionHandler: completions reach the handler in order, the
// handler may post work, Poll sees nothing, and closing flushes posted
// receives through the handler before Close returns.
func TestCompletionHandler(t *testing.T) {
	checkLeaks(t)
	var mu sync.Mutex
	var got []WorkCompletion
	replies := make(chan struct{}, 16)
	client, server := handlerPair(t, func(wc *WorkCompletion) {
		mu.Lock()
		got = append(got, *wc)
		mu.Unlock()
		if wc.Op == WCRecv && wc.Status == WCSuccess {
			replies <- struct{}{}
		}
	})
	cbuf := client.register(t, 64, LocalWrite)
	copy(cbuf.Bytes(), "abcdefgh")
	const n = 10
	for i := 0; i < n; i++ {
		require.NoError(t, client.qp.PostRecv(RecvWR{ID: 100 + uint64(i), SGL: []SGE{cbuf.SGE(8, 8)}}))
		require.NoError(t, client.qp.PostSend(SendWR{ID: uint64(i), Op: OpSend, Flags: Signaled, SGL: []SGE{cbuf.SGE(0, 8)}}))
		select {
		case <-replies:
		case <-time.After(10 * time.Second):
			t.Fatal("no reply")
		}
		require.Equal(t, "abcdefgh", string(cbuf.Bytes()[8:16]))
	}
	var wcs [4]WorkCompletion
	require.Zero(t, client.cq.Poll(wcs[:]), "a handler CQ queues nothing")
	require.Zero(t, client.cq.Len())

	require.NoError(t, client.qp.PostRecv(RecvWR{ID: 999}))
	require.NoError(t, client.qp.Close())
	server.qp.Close()
	mu.Lock()
	defer mu.Unlock()
	var sends, recvs []uint64
	for _, wc := range got {
		switch wc.Op {
		case WCSend:
			require.Equal(t, WCSuccess, wc.Status)
			sends = append(sends, wc.ID)
		case WCRecv:
			recvs = append(recvs, wc.ID)
		}
	}
	require.Len(t, sends, n)
	for i, id := range sends {
		require.Equal(t, uint64(i), id, "send completions in order")
	}
	require.Equal(t, uint64(999), recvs[len(recvs)-1], "the flushed receive was handed over before Close returned")
	require.Equal(t, WCWRFlushErr, got[len(got)-1].Status)
}

// BenchmarkPingPongHandler is BenchmarkPingPong with completion handlers:
// the server answers from inside its receive handler, the client waits on a
// channel its handler signals.
func BenchmarkPingPongHandler(b *testing.B) {
	done := make(chan struct{}, 1)
	client, server := handlerPair(b, func(wc *WorkCompletion) {
		if wc.Op == WCRecv {
			done <- struct{}{}
		}
	})
	cbuf := client.register(b, 16, LocalWrite)
	rsgl := []SGE{cbuf.SGE(8, 8)}
	ssgl := []SGE{cbuf.SGE(0, 8)}
	b.ReportAllocs()
	b.ResetTimer()
	sw := startCost()
	for i := 0; i < b.N; i++ {
		client.qp.PostRecv(RecvWR{SGL: rsgl})
		if err := client.qp.PostSend(SendWR{Op: OpSend, SGL: ssgl}); err != nil {
			b.Fatal(err)
		}
		<-done
	}
	sw.report(b)
	b.StopTimer()
	client.qp.Close()
	server.qp.Close()
}
