package conn

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestScale_1000QPs connects 1,000 queue pairs (500 connections) at once;
// each connection moves and verifies data with Write, Read and Send. The
// goroutines and the heap return to where they were once all are closed.
func TestScale_1000QPs(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	checkLeaks(t)
	const pairs = 500
	const size = 16 << 10

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pd := NewPD()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)

	// The server side: one CQ for all its queue pairs, a shared target
	// region, and a goroutine that accepts every request.
	scq := NewCQ(4 * pairs)
	target, err := pd.Register(make([]byte, pairs*size), LocalWrite|RemoteWrite|RemoteRead)
	require.NoError(t, err)
	rbuf, err := pd.Register(make([]byte, pairs*size), LocalWrite)
	require.NoError(t, err)
	var servers []*QP
	var smu sync.Mutex
	acceptDone := make(chan error, 1)
	go func() {
		for i := 0; i < pairs; i++ {
			cr, err := ln.AcceptRequest(ctx)
			if err != nil {
				acceptDone <- err
				return
			}
			qp, err := pd.NewQP(scq, QPCaps{SendDepth: 4, RecvDepth: 2})
			if err != nil {
				acceptDone <- err
				return
			}
			var k int
			fmt.Sscanf(string(cr.PrivateData()), "pair %d", &k)
			if err := qp.PostRecv(RecvWR{ID: uint64(k), SGL: []SGE{rbuf.SGE(k*size, size)}}); err != nil {
				acceptDone <- err
				return
			}
			smu.Lock()
			servers = append(servers, qp)
			smu.Unlock()
			if err := cr.Accept(ctx, qp); err != nil {
				acceptDone <- err
				return
			}
		}
		acceptDone <- nil
	}()

	var wg sync.WaitGroup
	errs := make(chan error, pairs)
	clients := make([]*QP, pairs)
	for k := 0; k < pairs; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			errs <- func() error {
				cpd := NewPD()
				cq := NewCQ(8)
				qp, err := cpd.NewQP(cq, QPCaps{SendDepth: 4, RecvDepth: 1})
				if err != nil {
					return err
				}
				clients[k] = qp
				if err := qp.Connect(ctx, "tcp", ln.Addr().String(), WithPrivateData([]byte(fmt.Sprintf("pair %d", k)))); err != nil {
					return err
				}
				src, _ := cpd.Register(pattern(size, byte(k)), LocalWrite)
				sink, _ := cpd.Register(make([]byte, size), LocalWrite)
				defer src.Deregister()
				defer sink.Deregister()
				remote := target.Remote(k * size)
				wrs := []SendWR{
					{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, size)}, Remote: remote},
					{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, size)}, Remote: remote},
					{ID: 3, Op: OpSend, Flags: Signaled, SGL: []SGE{src.SGE(0, size)}},
				}
				if _, err := qp.PostSendBatch(wrs); err != nil {
					return err
				}
				wcs := make([]WorkCompletion, 4)
				for got := 0; got < 3; {
					n, err := cq.Wait(ctx, wcs)
					if err != nil {
						return err
					}
					for _, wc := range wcs[:n] {
						if err := wc.Err(); err != nil {
							return err
						}
					}
					got += n
				}
				for i, b := range sink.Bytes() {
					if b != src.Bytes()[i] {
						return fmt.Errorf("pair %d: byte %d read back wrong", k, i)
					}
				}
				return nil
			}()
		}(k)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, <-acceptDone)

	// Every Send arrived at its own receive buffer; after it, the Write's
	// bytes are visible at the server too.
	wcs := make([]WorkCompletion, pairs)
	for got := 0; got < pairs; {
		n, err := scq.Wait(ctx, wcs[got:])
		require.NoError(t, err)
		for _, wc := range wcs[got : got+n] {
			require.NoError(t, wc.Err())
			require.Equal(t, WCRecv, wc.Op)
		}
		got += n
	}
	for k := 0; k < pairs; k++ {
		want := pattern(size, byte(k))
		require.Equal(t, want, rbuf.Bytes()[k*size:(k+1)*size], "pair %d send", k)
		require.Equal(t, want, target.Bytes()[k*size:(k+1)*size], "pair %d write", k)
	}

	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)
	t.Logf("%d queue pairs, %d goroutines, heap in use %.1f MiB (%.1f KiB per queue pair beyond the regions)",
		2*pairs, runtime.NumGoroutine(), float64(peak.HeapInuse)/(1<<20),
		float64(int64(peak.HeapInuse)-int64(before.HeapInuse)-int64(4*pairs*size))/1024/float64(2*pairs))

	for _, qp := range clients {
		qp.Close()
	}
	for _, qp := range servers {
		qp.Close()
	}
	ln.Close()
	clients, servers = nil, nil
	require.NoError(t, target.Deregister())
	require.NoError(t, rbuf.Deregister())
	target, rbuf = nil, nil

	// checkLeaks (goleak) verifies at the end that no goroutine is left.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > goroutinesBefore && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutinesBefore, "goroutines left after closing")
	runtime.GC()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	require.Less(t, growth, int64(16<<20), "heap grew by %d bytes after all queue pairs closed", growth)
}
