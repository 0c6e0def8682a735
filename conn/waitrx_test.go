package conn

import (
	"context"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// pingPong runs n Send/Receive round trips between client and server, the
// server answering from a goroutine blocked in CQ.Wait.
func pingPong(t *testing.T, client, server *endpoint, n int) {
	t.Helper()
	cbuf := client.register(t, 8, LocalWrite)
	sbuf := server.register(t, 8, LocalWrite)
	ssgl, csgl := []SGE{sbuf.SGE(0, 8)}, []SGE{cbuf.SGE(0, 8)}
	require.NoError(t, server.qp.PostRecv(RecvWR{SGL: ssgl}))
	served := make(chan error, 1)
	go func() {
		for i := 0; i < n; {
			wc := server.wait(t)
			if wc.Status != WCSuccess {
				served <- wc.Err()
				return
			}
			if wc.Op == WCRecv {
				i++
				if err := server.qp.PostRecv(RecvWR{SGL: ssgl}); err != nil {
					served <- err
					return
				}
				if err := server.qp.PostSend(SendWR{Op: OpSend, SGL: ssgl}); err != nil {
					served <- err
					return
				}
			}
		}
		served <- nil
	}()
	for i := 0; i < n; i++ {
		require.NoError(t, client.qp.PostRecv(RecvWR{SGL: csgl}))
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpSend, SGL: csgl}))
		for got := false; !got; {
			wc := client.wait(t)
			require.NoError(t, wc.Err())
			got = wc.Op == WCRecv
		}
	}
	require.NoError(t, <-served)
}

func TestWaitRunsTheReceiveLoop(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	pingPong(t, client, server, 200)
	// The client's Sends are answered while it waits: some replies, at
	// least, are read by the waiting goroutine itself.
	require.Positive(t, client.qp.eng.waitRx.Load()+server.qp.eng.waitRx.Load(),
		"no FPDU was received by a goroutine in CQ.Wait")
}

func TestWaitSharedCQLeavesReceivingToTheReceivers(t *testing.T) {
	checkLeaks(t)
	pd := NewPD()
	cq := NewCQ(64)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var servers [2]*endpoint
	var clients [2]*endpoint
	for i := range servers {
		servers[i] = newEndpoint(t, QPCaps{})
		qp, err := pd.NewQP(cq, QPCaps{})
		require.NoError(t, err)
		clients[i] = &endpoint{pd: pd, cq: cq, qp: qp}
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(context.Background(), servers[i].qp) }()
		require.NoError(t, qp.Connect(context.Background(), "tcp", ln.Addr().String()))
		require.NoError(t, <-errc)
		t.Cleanup(func() { qp.Close(); servers[i].qp.Close() })
	}
	require.Nil(t, cq.only.Load(), "two queue pairs complete on the CQ")
	for i := range clients {
		pingPong(t, clients[i], servers[i], 20)
		require.Zero(t, clients[i].qp.eng.waitRx.Load(), "a Wait on a shared CQ received for one queue pair")
	}
	clients[0].qp.Close()
	require.Eventually(t, func() bool { return cq.only.Load() == clients[1].qp.eng }, 10*time.Second, time.Millisecond,
		"the CQ's remaining queue pair was not recognized as its only one")
}

// A Wait that ends for its context reports the context's error, whether it
// was receiving at the time or had left the socket to the receiver.
func TestWaitContextWhileReceiving(t *testing.T) {
	checkLeaks(t)
	client, _ := connectPair(t, pairConfig{})
	var wc [1]WorkCompletion
	for _, d := range []time.Duration{200 * time.Microsecond, 5 * standByTick} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		_, err := client.cq.Wait(ctx, wc[:])
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "deadline %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*standByTick, cancel)
	_, err := client.cq.Wait(ctx, wc[:])
	require.ErrorIs(t, err, context.Canceled)
}

func TestWaitWokenByCompletionsOfOtherGoroutines(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	// The client's Wait holds the socket; the completion of its Send comes
	// from the posting or transmitting goroutine and must reach it.
	buf := client.register(t, 8, LocalWrite)
	sbuf := server.register(t, 8, LocalWrite)
	for i := 0; i < 50; i++ {
		require.NoError(t, server.qp.PostRecv(RecvWR{SGL: []SGE{sbuf.SGE(0, 8)}}))
		got := make(chan WorkCompletion, 1)
		go func() { got <- client.wait(t) }()
		require.NoError(t, client.qp.PostSend(SendWR{ID: uint64(i), Op: OpSend, Flags: Signaled, SGL: []SGE{buf.SGE(0, 8)}}))
		wc := <-got
		require.NoError(t, wc.Err())
		require.Equal(t, WCSend, wc.Op)
		require.Equal(t, uint64(i), wc.ID)
		server.waitOK(t, WCRecv)
	}
}

func TestWaitReceivingEndsWithTheConnection(t *testing.T) {
	checkLeaks(t)
	client, _ := connectPair(t, pairConfig{})
	buf := client.register(t, 8, LocalWrite)
	require.NoError(t, client.qp.PostRecv(RecvWR{ID: 7, SGL: []SGE{buf.SGE(0, 8)}}))
	got := make(chan WorkCompletion, 1)
	go func() { got <- client.wait(t) }()
	time.Sleep(standByTick / 2) // usually inside the Wait's receive loop
	require.NoError(t, client.qp.Close())
	wc := <-got
	require.Equal(t, WCWRFlushErr, wc.Status)
	require.Equal(t, uint64(7), wc.ID)
}

// After Waits stop, the receiver goroutine takes the socket back: work
// that completes with nobody waiting is still found by Poll.
func TestReceiverTakesBackAfterWaitsStop(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	pingPong(t, client, server, 20)
	buf := client.register(t, 8, LocalWrite)
	sbuf := server.register(t, 8, LocalWrite)
	for i := 0; i < 20; i++ {
		require.NoError(t, client.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{buf.SGE(0, 8)}}))
		require.NoError(t, server.qp.PostSend(SendWR{Op: OpSend, Flags: Signaled, SGL: []SGE{sbuf.SGE(0, 8)}}))
		var wc [1]WorkCompletion
		require.Eventually(t, func() bool { return client.cq.Poll(wc[:]) == 1 }, 10*time.Second, 50*time.Microsecond)
		require.NoError(t, wc[0].Err())
		require.Equal(t, uint64(i), wc[0].ID)
		server.waitOK(t, WCSend)
	}
}

// Several goroutines waiting on one CQ: one may receive, the others wait
// the usual way, and every completion reaches exactly one of them.
func TestWaitConcurrentWaiters(t *testing.T) {
	checkLeaks(t)
	const n = 300
	client, server := connectPair(t, pairConfig{caps: QPCaps{SendDepth: n, RecvDepth: n}})
	buf := client.register(t, 8, LocalWrite)
	sbuf := server.register(t, 8, LocalWrite)
	for i := 0; i < n; i++ {
		require.NoError(t, client.qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{buf.SGE(0, 8)}}))
	}
	var mu sync.Mutex
	seen := make(map[uint64]bool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]WorkCompletion, 3)
			for {
				k, err := client.cq.Wait(ctx, wcs)
				if err != nil {
					return
				}
				mu.Lock()
				for _, wc := range wcs[:k] {
					if wc.Op == WCRecv && wc.Status == WCSuccess {
						seen[wc.ID] = true
					}
				}
				done := len(seen) == n
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		require.NoError(t, server.qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{sbuf.SGE(0, 8)}}))
	}
	wg.Wait()
	require.Len(t, seen, n)
}

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	mu  sync.Mutex
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.set = append(c.set, t)
	c.mu.Unlock()
	return nil
}

// deadlines returns the deadlines set so far.
func (c *deadlineConn) deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.set)
}

// cleared reports whether no deadline is set: none ever was, or the last
// one cleared it.
func (c *deadlineConn) cleared() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.set) == 0 || c.set[len(c.set)-1].IsZero()
}

// A Wait's context is watched through one registration for as long as
// Waits pass the same one (by its Done channel): its ending cuts the
// socket wait with a past deadline, a new context replaces the
// registration, and a context that never ends needs none.
func TestWaitContextWatchedOncePerContext(t *testing.T) {
	c := &deadlineConn{}
	e := &engine{c: c}
	e.watchContext(context.Background())
	require.Nil(t, e.waitStop, "a context that never ends")
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	e.watchContext(ctx1)
	stop1 := e.waitStop
	require.NotNil(t, stop1)
	e.watchContext(context.WithValue(ctx1, c, 1)) // same Done channel
	require.Equal(t, ctx1.Done(), e.waitDone)

	ctx2, cancel2 := context.WithCancel(context.Background())
	e.watchContext(ctx2)
	require.False(t, stop1(), "the first registration was dropped")
	require.True(t, e.startAwait())
	cancel2()
	require.Eventually(t, func() bool {
		return e.await.Load() == awaitCut
	}, 5*time.Second, time.Millisecond, "the context's end did not cut the wait")
	require.True(t, e.endAwait())
	require.Equal(t, []time.Time{pastDeadline, {}}, c.set, "cut, then cleared")

	ctx3, cancel3 := context.WithCancel(context.Background())
	e.watchContext(ctx3)
	e.unwatchContext()
	require.Nil(t, e.waitStop)
	cancel3()
	require.Len(t, c.set, 2, "an unwatched context pokes nothing")
}

// A completion pushed after the holder looked at the CQ and before it
// marks its wait must not be waited past: either startAwait sees the poke
// or the poke sees the mark and cuts the wait with a past deadline, which
// the next wait then replaces.
func TestWaitPokeBeforeAndDuringTheWait(t *testing.T) {
	c := &deadlineConn{}
	e := &engine{c: c}
	e.poke()
	require.False(t, e.startAwait(), "a poke before the wait began")
	require.Empty(t, c.set, "nothing to cut")
	e.poked.Store(false) // the holder's next look at the CQ
	require.True(t, e.startAwait())
	e.poke()
	require.Equal(t, []time.Time{pastDeadline}, c.set, "the wait is cut")
	e.poke()
	require.Len(t, c.set, 1, "once")
	require.True(t, e.endAwait(), "the holder learns of the cut")
	require.Equal(t, []time.Time{pastDeadline, {}}, c.set, "and the cut's deadline is cleared")
	e.poked.Store(false)
	require.True(t, e.startAwait())
	require.False(t, e.endAwait(), "no poke, no cut")
}

// Pokes from another goroutine racing the holder's waits: when endAwait
// returns, the last deadline set is never a poke's past one (which would
// cut the next read, perhaps in the middle of an FPDU), and every past
// deadline is followed by its clearing. A wait startAwait refuses can be
// cut too (the poke came between the mark and the look): it is cleared
// the same way, so there are at least as many pairs as reported cuts.
func TestWaitPokeRacesTheWaitsEnd(t *testing.T) {
	c := &deadlineConn{}
	e := &engine{c: c}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				e.poke()
			}
		}
	}()
	// The poker needs a CPU: on a loaded machine under -race it may not
	// run at all during the first 50,000 waits, so the loop goes on (with
	// yields) until pokes have cut some, within a generous bound.
	cuts := 0
	for i, begin := 0, time.Now(); cuts < 500 && (i < 50000 || cuts == 0) && time.Since(begin) < time.Minute; i++ {
		if i%1000 == 999 {
			runtime.Gosched()
		}
		e.poked.Store(false)
		if e.startAwait() && e.endAwait() {
			cuts++
		}
		require.True(t, c.cleared(), "wait %d ended with a poke's deadline still set", i)
	}
	close(stop)
	<-done
	require.Positive(t, cuts, "no poke ever cut a wait")
	set := c.deadlines()
	require.GreaterOrEqual(t, len(set), 2*cuts)
	require.Zero(t, len(set)%2)
	for i, d := range set {
		require.Equal(t, i%2 == 1, d.IsZero(), "deadline %d: a cut, then its clearing", i)
	}
}

// A Wait receiving for its queue pair while the peer stops in the middle
// of an FPDU ends with its context, every time, and Close still ends the
// connection in bounded time with the receive flushed: the Wait's socket
// wait has no deadline of its own, so both must cut it.
func TestWaitPeerStallsInsideAnFPDU(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dial(mpa.Config{IRD: 1, ORD: 1})
	for i := uint64(1); i <= 2; i++ {
		require.NoError(t, s.qp.PostRecv(RecvWR{ID: i, SGL: []SGE{s.recv.SGE(0, 64)}}))
	}
	var wc [1]WorkCompletion
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.send(uSend(rdmap.OpSend, true, 0, 0, 1, 0, []byte("first")))
	n, err := s.cq.Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(1), wc[0].ID)
	require.NoError(t, wc[0].Err())

	f := p.frame(uSend(rdmap.OpSend, true, 0, 0, 2, 0, make([]byte, 40)))
	p.sendRaw(f[:20]) // the header and part of the payload, then nothing
	for _, d := range []time.Duration{time.Millisecond, 3 * standByTick, 20 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		_, err := s.cq.Wait(ctx, wc[:])
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "deadline %v", d)
	}
	stop, cancelStop := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancelStop)
	_, err = s.cq.Wait(stop, wc[:])
	require.ErrorIs(t, err, context.Canceled)

	returnsWithin(t, hangLimit, "Close", func() { s.qp.Close() })
	n, err = s.cq.Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(2), wc[0].ID)
	require.Equal(t, WCWRFlushErr, wc[0].Status)
}
