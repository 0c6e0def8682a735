//go:build linux || darwin || freebsd

package pmemsink

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// gateShadow stands in for the persistence hardware: it counts persists
// and the ranges they cover, can hold them until released, make them
// fail, and measures how many run at once.
type gateShadow struct {
	mu       sync.Mutex
	msyncs   []Range
	gate     chan struct{} // non-nil: every Msync waits for a value
	entered  chan struct{} // told of each Msync that waits at the gate
	fail     error
	running  int
	maxConc  int
	holdTime time.Duration
}

func (g *gateShadow) Msync(start, length uint64) error {
	g.mu.Lock()
	g.msyncs = append(g.msyncs, Range{Off: start, Len: length})
	g.running++
	g.maxConc = max(g.maxConc, g.running)
	gate, entered, fail, hold := g.gate, g.entered, g.fail, g.holdTime
	g.mu.Unlock()
	if gate != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		<-gate
	}
	time.Sleep(hold)
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	return fail
}

func (g *gateShadow) WriteBack(uint64) {}
func (g *gateShadow) Fence()           {}

func (g *gateShadow) persists() []Range {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Range(nil), g.msyncs...)
}

func gatedSink(t *testing.T, g *gateShadow, pages int, opts ...Option) *Sink {
	t.Helper()
	return openT(t, tpath(memDir(t), "sink"), int64(pages)*int64(pageSize()), append([]Option{WithShadow(g, ModeMsync)}, opts...)...)
}

// A Read on a connection that wrote nothing costs no persist; after a
// Write the Read's persist covers it, and the next Read is free again
// (read-after-write, research/persistence.md §7 check 4).
func TestRemote_ReadAfterWrite(t *testing.T) {
	g := &gateShadow{}
	s := gatedSink(t, g, 16)
	x := serve(t, s, ServerConfig{})
	in := dialT(t, x.addr(), WithMethod(MethodReadAfterWrite))
	ctx := tctx(t)
	for range 3 {
		_, err := in.Flush(ctx, 100, 1)
		require.NoError(t, err)
	}
	require.Empty(t, g.persists(), "reads on a clean connection persist nothing")
	page := pageSize()
	require.NoError(t, in.Write(ctx, 5*page+10, make([]byte, 100)))
	require.NoError(t, in.Write(ctx, 9*page, make([]byte, 2*page)))
	_, err := in.Flush(ctx, 0, 1) // an unrelated offset: the Read covers all
	require.NoError(t, err)
	require.ElementsMatch(t, []Range{{5 * page, page}, {9 * page, 2 * page}}, g.persists())
	_, err = in.Flush(ctx, 0, 1)
	require.NoError(t, err)
	require.Len(t, g.persists(), 2, "clean again")
	require.Equal(t, uint64(1), x.srv.Conns()[0].Stats().Persists)
}

// A held persist holds back only its own connection's response: the
// connection's later Writes are still placed, and other connections flush
// meanwhile.
func TestRemote_PersistDoesNotBlockTheConnection(t *testing.T) {
	g := &gateShadow{}
	s := gatedSink(t, g, 16)
	x := serve(t, s, ServerConfig{})
	a := dialT(t, x.addr())
	b := dialT(t, x.addr())
	ctx := tctx(t)
	page := pageSize()

	gate := make(chan struct{})
	g.mu.Lock()
	g.gate, g.entered = gate, make(chan struct{}, 4)
	g.mu.Unlock()
	flushed := make(chan error, 1)
	require.NoError(t, a.Write(ctx, 0, []byte("first")))
	go func() {
		_, err := a.Flush(ctx, 0, 5)
		flushed <- err
	}()
	<-g.entered // a's persist has started and is held
	// a's flush is held at the target; b's traffic goes on, and b sees
	// what a placed.
	back := make([]byte, 5)
	require.NoError(t, b.Read(ctx, 0, back))
	require.Equal(t, "first", string(back))
	g.mu.Lock()
	g.gate = nil // b's own persist passes
	g.mu.Unlock()
	require.NoError(t, b.Write(ctx, 8*page, []byte("b's")))
	res, err := b.Flush(ctx, 8*page, 3)
	require.NoError(t, err)
	require.Equal(t, MethodExtension, res.Method)
	select {
	case err := <-flushed:
		t.Fatalf("a's flush completed before its persist: %v", err)
	default:
	}
	close(gate)
	require.NoError(t, <-flushed)
}

// A persist that fails is never acknowledged: the Flush Response says it
// failed, a Read's connection ends with a Terminate, a GPSPM request gets
// no answer and its connection ends; and the failure is sticky.
func TestRemote_PersistErrorIsNeverAcknowledged(t *testing.T) {
	g := &gateShadow{fail: syscall.EIO}
	s := gatedSink(t, g, 16)
	ended := make(chan error, 2)
	x := serve(t, s, ServerConfig{Closed: func(c *ServerConn) { ended <- c.Err() }})
	ctx := tctx(t)

	a := dialT(t, x.addr(), WithGPSPM())
	require.NoError(t, a.Write(ctx, 10, []byte("lost")))
	_, err := a.Flush(ctx, 10, 4)
	var fe *conn.FlushError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, rdmap.FlushPersistFailed, fe.Status)
	// The stream goes on after a failed Flush; a Read now needs the same
	// persist, which fails again: the Read is never answered.
	_, err = a.Flush(ctx, 10, 4, UseMethod(MethodReadAfterWrite))
	require.Error(t, err)
	var te *rdmap.TerminateError
	require.ErrorAs(t, err, &te, "the target ended the stream")
	require.Error(t, s.Err(), "the sink's persist error is kept")

	c := dialT(t, x.addr(), WithGPSPM())
	require.NoError(t, c.Write(ctx, 4096, []byte("also lost")))
	_, err = c.Flush(ctx, 4096, 9, UseMethod(MethodGPSPM))
	require.Error(t, err, "no GPSPM response")
	var pe *PersistError
	require.ErrorAs(t, <-ended, &pe, "the first connection: its Read's persist failed")
	require.ErrorAs(t, <-ended, &pe, "the GPSPM connection")
}

// A fault in the mapping (the file truncated under the sink) ends only the
// connection that touched it; the error names the fault; other
// connections go on.
func TestRemote_FaultEndsOnlyThatConnection(t *testing.T) {
	linuxOnly(t)
	page := pageSize()
	path := tpath(memDir(t), "sink")
	s := openT(t, path, int64(4*page))
	var mu sync.Mutex
	var closed []*ServerConn
	x := serve(t, s, ServerConfig{Closed: func(c *ServerConn) { mu.Lock(); closed = append(closed, c); mu.Unlock() }})
	a := dialT(t, x.addr())
	b := dialT(t, x.addr())
	ctx := tctx(t)
	require.NoError(t, b.Write(ctx, 0, []byte("still here")))
	require.NoError(t, os.Truncate(path, int64(page)))
	require.NoError(t, a.Write(ctx, 3*page, []byte("into the hole")))
	_, err := a.Flush(ctx, 3*page, 13)
	require.Error(t, err, "the faulting connection ended")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(closed) == 1 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	first := closed[0]
	mu.Unlock()
	var mf *conn.MemoryFaultError
	require.ErrorAs(t, first.Err(), &mf, "the target application learns of the fault")
	back := make([]byte, 10)
	require.NoError(t, b.Read(ctx, 0, back))
	require.Equal(t, "still here", string(back))
	_, err = b.Flush(ctx, 0, 10)
	require.NoError(t, err)
}

// Sink.Close ends the connections using it, within its timeout, and they
// clean up; their initiators see the connection end.
func TestRemote_SinkCloseEndsConnections(t *testing.T) {
	path := tpath(memDir(t), "sink")
	s, err := Open(path, 1<<20, WithCloseTimeout(5*time.Second))
	require.NoError(t, err)
	x := serve(t, s, ServerConfig{})
	in := dialT(t, x.addr())
	ctx := tctx(t)
	require.NoError(t, in.Write(ctx, 0, []byte("bye")))
	_, err = in.Flush(ctx, 0, 3)
	require.NoError(t, err)
	sc := x.srv.Conns()[0]
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Sink.Close did not return")
	}
	<-sc.Done()
	_, err = in.Flush(ctx, 0, 3)
	require.Error(t, err, "the connection has ended")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "bye", string(b[:3]))
}

// The persists of many connections run at most WithPersistConcurrency at
// once.
func TestRemote_PersistConcurrencyBound(t *testing.T) {
	g := &gateShadow{holdTime: 2 * time.Millisecond}
	s := gatedSink(t, g, 64, WithPersistConcurrency(1))
	x := serve(t, s, ServerConfig{})
	ctx := tctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	page := pageSize()
	for i := range 4 {
		in := dialT(t, x.addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				off := uint64(i*16+j) * page
				if err := in.Write(ctx, off, []byte{1}); err != nil {
					errs <- err
					return
				}
				if _, err := in.Flush(ctx, off, 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, errors.Join(<-errs))
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.msyncs, 40)
	require.Equal(t, 1, g.maxConc)
}
