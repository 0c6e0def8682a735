package conn

import (
	"context"
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
