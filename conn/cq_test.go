package conn

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Reservations racing for the last slots: exactly as many succeed as the
// CQ holds, whatever the interleaving, and a polled completion frees its
// slot for the next reservation.
func TestCQReservationsNeverOvercommit(t *testing.T) {
	cq := NewCQ(8)
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cq.reserve(1) == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 8, ok.Load())
	require.ErrorIs(t, cq.reserve(1), ErrCQFull)

	cq.push(&WorkCompletion{ID: 1})
	require.ErrorIs(t, cq.reserve(1), ErrCQFull, "a pushed completion still holds its slot")
	var wcs [4]WorkCompletion
	require.Equal(t, 1, cq.Poll(wcs[:]))
	require.NoError(t, cq.reserve(1), "polling freed the slot")
	require.ErrorIs(t, cq.reserve(1), ErrCQFull)
	cq.unreserve(8)
	require.NoError(t, cq.reserve(8))
	require.ErrorIs(t, cq.reserve(1), ErrCQFull)
}

// Posting, completing with and without a completion, and polling from
// several goroutines at once leave the CQ empty with nothing reserved.
func TestCQReservationsConcurrent(t *testing.T) {
	cq := NewCQ(16)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	polled := make(chan int)
	go func() {
		n := 0
		var wcs [8]WorkCompletion
		for {
			n += cq.Poll(wcs[:])
			select {
			case <-stop:
				for k := cq.Poll(wcs[:]); k > 0; k = cq.Poll(wcs[:]) {
					n += k
				}
				polled <- n
				return
			default:
			}
		}
	}()
	var pushed atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if cq.reserve(1) != nil {
					continue
				}
				if (i+g)%3 == 0 {
					cq.push(&WorkCompletion{ID: uint64(i)})
					pushed.Add(1)
				} else {
					cq.unreserve(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.EqualValues(t, pushed.Load(), <-polled)
	require.Zero(t, cq.Len())
	require.Zero(t, cq.used.Load(), "every reservation was given back")
}
