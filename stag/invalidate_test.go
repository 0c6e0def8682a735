package stag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 5040 §4 carries the STag to invalidate in Send with Invalidate; the
// acceptance rules and their codes follow siw_invalidate_stag and
// siw_rdmap_complete (PD mismatch 0/1/0x09, everything else 0/2/0x09), with
// the stricter key and state checks this package documents.
func TestRemoteInvalidate_Rules(t *testing.T) {
	tab := newTable(t)
	pd, other := tab.NewPD(), tab.NewPD()
	mk := func(opts ...RegisterOption) *Region {
		return register(t, pd, make([]byte, 32), allAccess, BaseZero(), opts...)
	}

	t.Run("valid region of this PD", func(t *testing.T) {
		r := mk()
		require.Equal(t, OK, pd.RemoteInvalidate(r.STag()))
		require.Equal(t, StateInvalid, r.State())
		_, f := pd.Lookup(r.STag(), 0, 1, RemoteRead)
		require.Equal(t, Invalidated, f)
	})
	t.Run("shared on multiple streams (RFC 5040 §8.1.1 item 7)", func(t *testing.T) {
		r := mk()
		pd.AddStream(1)
		pd.AddStream(1)
		require.Equal(t, SharedStreams, pd.RemoteInvalidate(r.STag()))
		require.Equal(t, StateValid, r.State(), "a refused invalidation changes nothing")
		// The earlier checks keep their codes on a shared PD.
		require.Equal(t, CannotInvalidatePD, other.RemoteInvalidate(r.STag()))
		nri := mk(NoRemoteInvalidate)
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(nri.STag()))
		pd.AddStream(-1)
		require.Equal(t, OK, pd.RemoteInvalidate(r.STag()), "one stream left: not shared")
		pd.AddStream(-1)
		require.Equal(t, 0, pd.Streams())
	})
	t.Run("already invalid", func(t *testing.T) {
		r := mk()
		require.NoError(t, r.Invalidate())
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(r.STag()))
	})
	t.Run("other PD", func(t *testing.T) {
		r := mk()
		f := other.RemoteInvalidate(r.STag())
		require.Equal(t, CannotInvalidatePD, f)
		require.Equal(t, StateValid, r.State(), "a refused invalidation changes nothing")
	})
	t.Run("other PD wins over invalid state", func(t *testing.T) {
		r := mk()
		require.NoError(t, r.Invalidate())
		require.Equal(t, CannotInvalidatePD, other.RemoteInvalidate(r.STag()))
	})
	t.Run("wrong key", func(t *testing.T) {
		r := mk()
		f := other.RemoteInvalidate(r.STag() ^ 0x01)
		require.Equal(t, CannotInvalidate, f, "a wrong key reveals nothing about the PD")
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(r.STag()^0x80))
		require.Equal(t, StateValid, r.State())
	})
	t.Run("unknown index", func(t *testing.T) {
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(1))
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(MakeSTag(MaxIndex, 0)))
	})
	t.Run("freed", func(t *testing.T) {
		r := mk()
		require.NoError(t, r.Deregister())
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(r.STag()))
	})
	t.Run("opted out", func(t *testing.T) {
		r := mk(NoRemoteInvalidate)
		require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(r.STag()))
		require.Equal(t, StateValid, r.State())
		require.Equal(t, OK, pd.Invalidate(r.STag()), "local invalidation still works")
		require.Equal(t, StateInvalid, r.State())
	})
}

func TestLocalInvalidate_Rules(t *testing.T) {
	tab := newTable(t)
	pd, other := tab.NewPD(), tab.NewPD()
	r := register(t, pd, make([]byte, 32), allAccess, BaseZero())

	require.Equal(t, InvalidSTag, pd.Invalidate(r.STag()^0x01))
	require.Equal(t, InvalidSTag, pd.Invalidate(MakeSTag(MaxIndex, 1)))
	require.Equal(t, PDMismatch, other.Invalidate(r.STag()))
	require.Equal(t, StateValid, r.State())

	require.Equal(t, OK, pd.Invalidate(r.STag()))
	require.Equal(t, StateInvalid, r.State())
	require.Equal(t, OK, pd.Invalidate(r.STag()), "invalidating an invalid STag is allowed")
	require.NoError(t, r.Invalidate(), "also through the handle")

	require.NoError(t, r.Deregister())
	require.Equal(t, InvalidSTag, pd.Invalidate(r.STag()))
	require.ErrorIs(t, r.Invalidate(), ErrDeregistered)
}

// Revalidation issues a new key at the same index, so the invalidated STag
// stays dead while the region is reachable again.
func TestRevalidate(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	buf := make([]byte, 32)
	r := register(t, pd, buf, allAccess, BaseZero())
	old := r.STag()

	_, err := r.Revalidate()
	require.ErrorIs(t, err, ErrNotInvalid)

	for i := 0; i < 300; i++ {
		require.NoError(t, r.Invalidate())
		s, err := r.Revalidate()
		require.NoError(t, err)
		require.Equal(t, old.Index(), s.Index())
		require.NotEqual(t, old.Key(), s.Key())
		require.Equal(t, s, r.STag())
		_, f := pd.Lookup(old, 0, 1, RemoteRead)
		require.Equal(t, InvalidSTag, f)
		got, f := pd.Lookup(s, 0, 32, RemoteWrite)
		require.Equal(t, OK, f)
		requireAliases(t, buf, got, 0, 32)
		old = s
	}

	require.NoError(t, r.Acquire())
	require.NoError(t, r.Invalidate())
	_, err = r.Revalidate()
	require.NoError(t, err)
	require.Equal(t, 1, r.Refs(), "references survive revalidation")
	r.Release()

	require.NoError(t, r.Deregister())
	_, err = r.Revalidate()
	require.ErrorIs(t, err, ErrDeregistered)
}
