package stag

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRefs_DeregisterBusy(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r := register(t, pd, make([]byte, 8), allAccess, BaseZero())

	require.NoError(t, r.Acquire())
	require.NoError(t, r.Acquire())
	require.Equal(t, 2, r.Refs())
	require.ErrorIs(t, r.Deregister(), ErrBusy)
	require.Equal(t, StateValid, r.State(), "a refused Deregister leaves the region usable")
	_, f := pd.Lookup(r.STag(), 0, 8, RemoteRead)
	require.Equal(t, OK, f)

	r.Release()
	require.ErrorIs(t, r.Deregister(), ErrBusy)
	r.Release()
	require.NoError(t, r.Deregister())
	require.ErrorIs(t, r.Deregister(), ErrDeregistered)
	require.ErrorIs(t, r.Acquire(), ErrDeregistered)
	require.Panics(t, r.Release)
	require.Zero(t, tab.Len())
}

func TestRefs_InvalidatedStillPinnable(t *testing.T) {
	tab := newTable(t)
	r := register(t, tab.NewPD(), make([]byte, 8), allAccess, BaseZero())
	require.NoError(t, r.Invalidate())
	require.NoError(t, r.Acquire())
	require.ErrorIs(t, r.Deregister(), ErrBusy)
	r.Release()
	require.NoError(t, r.Deregister())
}

func TestRefs_Overflow(t *testing.T) {
	tab := newTable(t)
	r := register(t, tab.NewPD(), make([]byte, 8), allAccess, BaseZero())
	r.word.Add(maxRefs - 1) // as if maxRefs-1 acquisitions were held
	require.NoError(t, r.Acquire())
	require.ErrorIs(t, r.Acquire(), ErrTooManyRefs)
	require.Equal(t, maxRefs, r.Refs())
	require.Equal(t, StateValid, r.State(), "the count never spills into the state")
}

// Acquire and Deregister race: once Deregister succeeds no Acquire may
// succeed, and no holder may ever observe its region freed.
func TestRefs_AcquireVersusDeregister(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	for round := 0; round < 50; round++ {
		r := register(t, pd, make([]byte, 8), allAccess, BaseZero())
		var freed atomic.Bool
		var bad atomic.Int32
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					if r.Acquire() != nil {
						continue
					}
					if freed.Load() || r.State() == StateFree {
						bad.Add(1)
					}
					r.Release()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := r.Deregister()
				if err == nil {
					freed.Store(true)
					return
				}
				if err != ErrBusy {
					bad.Add(1)
					return
				}
			}
		}()
		wg.Wait()
		require.Zero(t, bad.Load())
		require.Equal(t, StateFree, r.State())
		require.Zero(t, r.Refs())
	}
}
