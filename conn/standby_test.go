package conn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// standingBy reports whether e's receiver is in the stand-by set.
func (s *standBySet) standingBy(e *engine) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := e.standByAt
	return i >= 0 && i < len(s.list) && s.list[i] == e
}

// A Wait that holds the socket through a long wait leaves its receiver
// asleep: no tick wakes it, and the ticks stop while nothing but that
// Wait's return can change. The Wait's return starts them again, and the
// receiver then takes the socket and places what arrives with nobody
// waiting.
func TestStandByLongWaitWakesNoReceiver(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	pingPong(t, client, server, 20) // both receivers stand by
	ce := client.qp.eng

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		var wc [1]WorkCompletion
		_, err := client.cq.Wait(ctx, wc[:])
		waited <- err
	}()
	require.Eventually(t, func() bool {
		return client.cq.waiting.Load() == ce && standBys.standingBy(ce)
	}, 10*time.Second, time.Millisecond, "the Wait did not take the socket from a receiver standing by")
	woken := ce.wokenRx.Load()
	require.Eventually(t, func() bool {
		standBys.mu.Lock()
		defer standBys.mu.Unlock()
		return standBys.parked.Load() && !standBys.armed
	}, 10*time.Second, time.Millisecond, "the ticks did not stop")
	require.Equal(t, woken, ce.wokenRx.Load(), "a tick woke the receiver of a Wait holding the socket")

	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
	require.False(t, standBys.parked.Load(), "the Wait's return started the ticks again")
	require.Eventually(t, func() bool { return !standBys.standingBy(ce) }, 10*time.Second, time.Millisecond,
		"the receiver did not take the socket back")
	require.Greater(t, ce.wokenRx.Load(), woken)

	buf := client.register(t, 8, LocalWrite)
	sbuf := server.register(t, 8, LocalWrite)
	require.NoError(t, client.qp.PostRecv(RecvWR{ID: 9, SGL: []SGE{buf.SGE(0, 8)}}))
	require.NoError(t, server.qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{sbuf.SGE(0, 8)}}))
	var wc [1]WorkCompletion
	require.Eventually(t, func() bool { return client.cq.Poll(wc[:]) == 1 }, 10*time.Second, 50*time.Microsecond)
	require.NoError(t, wc[0].Err())
	require.Equal(t, uint64(9), wc[0].ID)
}

// The stand-by set's ticks stop with its last receiver: an idle process
// has no timer and no goroutine for it.
func TestStandByTicksStopWithTheLastReceiver(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	pingPong(t, client, server, 20)
	require.NoError(t, client.qp.Close())
	require.NoError(t, server.qp.Close())
	require.Eventually(t, func() bool {
		standBys.mu.Lock()
		defer standBys.mu.Unlock()
		return len(standBys.list) == 0 && !standBys.armed
	}, 10*time.Second, time.Millisecond)
}

// Many connections standing by and taking back at once, some closed in
// the middle of their round trips: every round trip completes or fails
// with the connection, and the set ends empty with its timer stopped.
func TestStandByManyConnections(t *testing.T) {
	checkLeaks(t)
	const pairs, trips = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, pairs)
	for p := range pairs {
		client, server := connectPair(t, pairConfig{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- standByTrips(client, server, trips, p%4 == 3)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		standBys.mu.Lock()
		defer standBys.mu.Unlock()
		return len(standBys.list) == 0 && !standBys.armed
	}, 10*time.Second, time.Millisecond)
}

// standByTrips runs round trips answered from a Wait, pausing now and
// then for longer than two ticks (the receivers take the sockets back);
// with closeEarly the client closes half-way and the Waits must end.
func standByTrips(client, server *endpoint, trips int, closeEarly bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cbuf, err := client.qp.PD().Register(make([]byte, 8), LocalWrite)
	if err != nil {
		return err
	}
	sbuf, err := server.qp.PD().Register(make([]byte, 8), LocalWrite)
	if err != nil {
		return err
	}
	csgl, ssgl := []SGE{cbuf.SGE(0, 8)}, []SGE{sbuf.SGE(0, 8)}
	echoed := make(chan error, 1)
	if err := server.qp.PostRecv(RecvWR{SGL: ssgl}); err != nil {
		return err
	}
	go func() {
		var wc [1]WorkCompletion
		for {
			for {
				if _, err := server.cq.Wait(ctx, wc[:]); err != nil {
					echoed <- err
					return
				}
				if wc[0].Err() != nil {
					echoed <- nil
					return
				}
				if wc[0].Op == WCRecv {
					break
				}
			}
			// The next receive first: the client's next Send may come
			// the moment it has this answer.
			if err := server.qp.PostRecv(RecvWR{SGL: ssgl}); err != nil {
				echoed <- nil // the connection ended
				return
			}
			if err := server.qp.PostSend(SendWR{Op: OpSend, SGL: ssgl}); err != nil {
				echoed <- nil
				return
			}
		}
	}()
	var wc [1]WorkCompletion
	for i := range trips {
		if closeEarly && i == trips/2 {
			client.qp.Close()
			break
		}
		if i%25 == 24 {
			time.Sleep(3 * standByTick)
		}
		if err := client.qp.PostRecv(RecvWR{SGL: csgl}); err != nil {
			return err
		}
		if err := client.qp.PostSend(SendWR{Op: OpSend, SGL: csgl}); err != nil {
			return err
		}
		if _, err := client.cq.Wait(ctx, wc[:]); err != nil {
			return err
		}
		if err := wc[0].Err(); err != nil {
			return err
		}
	}
	client.qp.Close()
	return <-echoed
}
