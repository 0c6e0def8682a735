package stag

import (
	"runtime"
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

func TestLookupRemote_HoldsAReference(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	buf := make([]byte, 64)
	r, err := pd.RegisterAttached(buf, allAccess, BaseZero(), "owner")
	require.NoError(t, err)
	require.Equal(t, "owner", r.Attachment())

	got, b, f := pd.LookupRemote(r.STag(), 8, 16, RemoteWrite)
	require.Equal(t, OK, f)
	require.Same(t, r, got)
	require.Equal(t, &buf[8], &b[0])
	require.Len(t, b, 16)
	require.Equal(t, 1, r.RemoteUses())
	require.Zero(t, r.Refs(), "remote uses are not local references")

	// Invalidation and deregistration do not wait and do not fail: they
	// make later lookups fail and leave the reference for the caller to see.
	require.NoError(t, r.Invalidate())
	_, _, f = pd.LookupRemote(r.STag(), 8, 16, RemoteWrite)
	require.Equal(t, Invalidated, f)
	require.Equal(t, 1, r.RemoteUses())
	require.NoError(t, r.Deregister())
	_, _, f = pd.LookupRemote(r.STag(), 8, 16, RemoteWrite)
	require.Equal(t, InvalidSTag, f)
	r.ReleaseRemote()
	require.Zero(t, r.RemoteUses())
	require.Panics(t, r.ReleaseRemote)

	_, _, f = pd.LookupRemote(r.STag()^1, 0, 1, RemoteWrite)
	require.Equal(t, InvalidSTag, f)
	require.Nil(t, register(t, pd, make([]byte, 8), allAccess, BaseZero()).Attachment())
}

// An invalidation racing with lookups either makes the lookup fail or
// sees its reference: after Invalidate has returned and RemoteUses has
// been seen at zero, no lookup succeeds any more.
func TestLookupRemote_VersusInvalidate(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	for round := 0; round < 200; round++ {
		r := register(t, pd, make([]byte, 64), allAccess, BaseZero())
		var wg sync.WaitGroup
		var after atomic.Bool
		var late atomic.Int32
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					got, _, f := pd.LookupRemote(r.STag(), 0, 8, RemoteWrite)
					if f != OK {
						continue
					}
					if after.Load() {
						late.Add(1)
					}
					got.ReleaseRemote()
				}
			}()
		}
		require.NoError(t, r.Invalidate())
		for r.RemoteUses() != 0 {
			runtime.Gosched()
		}
		after.Store(true)
		wg.Wait()
		require.Zero(t, late.Load(), "a lookup succeeded after the invalidation was seen drained")
		require.NoError(t, r.Deregister())
	}
}
