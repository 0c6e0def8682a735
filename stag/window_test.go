package stag

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

type stream struct{ id int } // stands in for conn's *QP

func bindable(t testing.TB, pd *PD, n int) (*Region, []byte) {
	t.Helper()
	buf := make([]byte, n)
	return register(t, pd, buf, allAccess, BaseAt(0x1000)), buf
}

func alloc(t testing.TB, pd *PD, typ WindowType) *Window {
	t.Helper()
	w, err := pd.AllocWindow(typ)
	require.NoError(t, err)
	return w
}

func bind(t testing.TB, w *Window, spec BindSpec) *Region {
	t.Helper()
	b, _, err := w.Bind(spec)
	require.NoError(t, err)
	return b
}

func TestWindow_AllocUnbound(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	w := alloc(t, pd, WindowType1)
	require.False(t, w.Bound())
	require.Equal(t, 1, tab.Len(), "a window holds an index")
	_, f := pd.Lookup(w.STag(), 0, 1, RemoteRead)
	require.Equal(t, Invalidated, f, "an unbound window names nothing")
	_, err := pd.AllocWindow(3)
	require.ErrorIs(t, err, ErrBadOption)
	_, err = w.Free()
	require.NoError(t, err)
	require.Equal(t, 0, tab.Len())
	_, err = w.Free()
	require.ErrorIs(t, err, ErrDeregistered)
	_, f = pd.Lookup(w.STag(), 0, 1, RemoteRead)
	require.Equal(t, InvalidSTag, f)
}

// The window narrows the region: its range, its rights, its base.
func TestWindow_LookupNarrowsRegion(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, buf := bindable(t, pd, 256)
	w := alloc(t, pd, WindowType1)
	b := bind(t, w, BindSpec{Region: r, Offset: 64, Length: 32, Access: RemoteWrite})
	require.Equal(t, KindMemoryWindow, b.Kind())
	require.Equal(t, r, b.Parent())
	require.Equal(t, uint64(0x1000+64), b.Base(), "VA-based: the region's own TOs")
	got, f := pd.Lookup(b.STag(), 0x1000+64, 32, RemoteWrite)
	require.Equal(t, OK, f)
	requireAliases(t, buf, got, 64, 32)
	for _, c := range []struct {
		to, n uint64
		need  Access
		want  Failure
	}{
		{0x1000 + 63, 1, RemoteWrite, BaseBounds},
		{0x1000 + 96, 1, RemoteWrite, BaseBounds},
		{0x1000 + 90, 7, RemoteWrite, BaseBounds},
		{0x1000 + 64, 1, RemoteRead, AccessRights},
		{0x1000 + 64, 8, RemoteAtomic, AccessRights},
		{^uint64(0), 2, RemoteWrite, TOWrap},
	} {
		_, f := pd.Lookup(b.STag(), c.to, c.n, c.need)
		require.Equal(t, c.want, f, "to=%#x n=%d %v", c.to, c.n, c.need)
	}
	_, f = tab.NewPD().Lookup(b.STag(), 0x1000+64, 1, RemoteWrite)
	require.Equal(t, PDMismatch, f)

	z := alloc(t, pd, WindowType1)
	zb := bind(t, z, BindSpec{Region: r, Offset: 200, Length: 56, Access: RemoteRead | RemoteWrite, ZeroBased: true})
	got, f = pd.Lookup(zb.STag(), 0, 56, RemoteRead)
	require.Equal(t, OK, f)
	requireAliases(t, buf, got, 200, 56)
	_, f = pd.Lookup(zb.STag(), 1, 56, RemoteRead)
	require.Equal(t, BaseBounds, f)
	require.Equal(t, 2, r.Windows())
}

// A window never grants more than its region, and the region must allow
// binding (verbs' IBV_ACCESS_MW_BIND).
func TestWindow_BindRules(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	ro := register(t, pd, make([]byte, 64), LocalRead|RemoteRead|MWBind, BaseZero())
	nobind := register(t, pd, make([]byte, 64), LocalWrite|RemoteWrite|RemoteRead, BaseZero())
	otherPD := register(t, tab.NewPD(), make([]byte, 64), allAccess, BaseZero())
	invalid := register(t, pd, make([]byte, 64), allAccess, BaseZero())
	require.NoError(t, invalid.Invalidate())
	w1, w2 := alloc(t, pd, WindowType1), alloc(t, pd, WindowType2)
	q := &stream{1}
	for name, c := range map[string]struct {
		w    *Window
		spec BindSpec
	}{
		"no region":          {w1, BindSpec{Length: 1, Access: RemoteRead}},
		"window as region":   {w1, BindSpec{Region: w2.Binding(), Length: 1, Access: RemoteRead}},
		"other PD":           {w1, BindSpec{Region: otherPD, Length: 1, Access: RemoteRead}},
		"no MWBind":          {w1, BindSpec{Region: nobind, Length: 1, Access: RemoteRead}},
		"more than region":   {w1, BindSpec{Region: ro, Length: 1, Access: RemoteWrite}},
		"local right":        {w1, BindSpec{Region: r, Length: 1, Access: LocalWrite | RemoteWrite}},
		"MWBind right":       {w1, BindSpec{Region: r, Length: 1, Access: RemoteRead | MWBind}},
		"no rights":          {w1, BindSpec{Region: r, Length: 1}},
		"past the end":       {w1, BindSpec{Region: r, Offset: 60, Length: 5, Access: RemoteRead}},
		"offset overflow":    {w1, BindSpec{Region: r, Offset: ^uint64(0), Length: 2, Access: RemoteRead}},
		"invalid region":     {w1, BindSpec{Region: invalid, Length: 1, Access: RemoteRead}},
		"type 2 zero length": {w2, BindSpec{Region: r, Access: RemoteRead, QP: q, Key: 1}},
		"type 2 no stream":   {w2, BindSpec{Region: r, Length: 1, Access: RemoteRead, Key: 1}},
		"type 2 same key":    {w2, BindSpec{Region: r, Length: 1, Access: RemoteRead, QP: q, Key: w2.STag().Key()}},
	} {
		before := c.w.STag()
		_, _, err := c.w.Bind(c.spec)
		require.ErrorIs(t, err, ErrBadBind, name)
		require.Equal(t, before, c.w.STag(), "%s: a refused bind changes nothing", name)
		require.False(t, c.w.Bound(), name)
	}
	require.Equal(t, 0, r.Windows())
	require.Equal(t, 0, ro.Windows())
}

// Type 2: the owner picks the key; the window is usable from its stream
// only, and must be invalidated before it is bound again.
func TestWindow_Type2_StreamAndKey(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	w := alloc(t, pd, WindowType2)
	q, other := &stream{1}, &stream{2}
	key := w.STag().Key() + 1
	b := bind(t, w, BindSpec{Region: r, Length: 64, Access: RemoteRead, QP: q, Key: key})
	require.Equal(t, MakeSTag(w.STag().Index(), key), b.STag())
	_, _, f := pd.LookupRemoteFrom(b.STag(), 0x1000, 8, RemoteRead, q)
	require.Equal(t, OK, f)
	b.ReleaseRemote()
	_, _, f = pd.LookupRemoteFrom(b.STag(), 0x1000, 8, RemoteRead, other)
	require.Equal(t, QPMismatch, f)
	_, f = pd.Lookup(b.STag(), 0x1000, 8, RemoteRead)
	require.Equal(t, QPMismatch, f, "no stream is not its stream")
	_, _, f = pd.LookupRemoteFrom(b.STag(), 0x1000, 8, RemoteWrite, other)
	require.Equal(t, QPMismatch, f, "the stream is checked before the rights")

	_, _, err := w.Bind(BindSpec{Region: r, Length: 8, Access: RemoteRead, QP: q, Key: key + 1})
	require.ErrorIs(t, err, ErrWindowBound)
	require.Equal(t, b.STag(), w.STag())
}

// RFC 5040 §5.3 and verbs: peers may invalidate type 2 windows only, from
// the window's stream; type 1 windows change by their owner's hand alone.
func TestWindow_RemoteInvalidate_RFC5040_5_3(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	q, other := &stream{1}, &stream{2}

	w1 := alloc(t, pd, WindowType1)
	b1 := bind(t, w1, BindSpec{Region: r, Length: 64, Access: RemoteWrite})
	require.Equal(t, CannotInvalidate, pd.RemoteInvalidateFrom(b1.STag(), q))
	require.Equal(t, CannotInvalidate, pd.InvalidateFrom(b1.STag(), q), "IBV_WR_LOCAL_INV: type 2 only")
	require.True(t, w1.Bound())
	require.False(t, b1.AllowsRemoteInvalidate())

	w2 := alloc(t, pd, WindowType2)
	b2 := bind(t, w2, BindSpec{Region: r, Length: 64, Access: RemoteWrite, QP: q, Key: 7})
	require.Equal(t, CannotInvalidatePD, tab.NewPD().RemoteInvalidateFrom(b2.STag(), q))
	require.Equal(t, QPMismatch, pd.RemoteInvalidateFrom(b2.STag(), other))
	require.Equal(t, QPMismatch, pd.InvalidateFrom(b2.STag(), other))
	require.Equal(t, CannotInvalidate, pd.RemoteInvalidateFrom(b2.STag()^1, q), "wrong key")
	require.True(t, w2.Bound())
	require.Equal(t, 2, r.Windows())

	require.Equal(t, OK, pd.RemoteInvalidateFrom(b2.STag(), q))
	require.False(t, w2.Bound())
	_, _, f := pd.LookupRemoteFrom(b2.STag(), 0x1000, 1, RemoteWrite, q)
	require.Equal(t, Invalidated, f)
	require.Equal(t, CannotInvalidate, pd.RemoteInvalidateFrom(b2.STag(), q), "already invalid")
	require.Equal(t, OK, pd.InvalidateFrom(b2.STag(), q), "local invalidation of an invalid STag succeeds")
	require.Equal(t, 1, r.Windows())

	// Rebound with a new key: the old STag stays dead.
	b3 := bind(t, w2, BindSpec{Region: r, Length: 8, Access: RemoteWrite, QP: other, Key: 8})
	_, _, f = pd.LookupRemoteFrom(b2.STag(), 0x1000, 1, RemoteWrite, q)
	require.Equal(t, InvalidSTag, f)
	require.Equal(t, OK, pd.InvalidateFrom(b3.STag(), other))
	require.Equal(t, 1, r.Windows())
}

// A type 1 rebind or zero-length bind retires the previous STag at once
// and reports the binding whose accesses the caller must wait out.
func TestWindow_Type1_RebindAndUnbind(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	w := alloc(t, pd, WindowType1)
	b, prev, err := w.Bind(BindSpec{Region: r, Length: 64, Access: RemoteRead})
	require.NoError(t, err)
	require.Nil(t, prev)
	held, _, f := pd.LookupRemoteFrom(b.STag(), 0x1000, 8, RemoteRead, nil)
	require.Equal(t, OK, f)

	b2, prev, err := w.Bind(BindSpec{Region: r, Offset: 8, Length: 8, Access: RemoteRead})
	require.NoError(t, err)
	require.Equal(t, b, prev)
	require.Equal(t, 1, prev.RemoteUses(), "the access under way is reported")
	held.ReleaseRemote()
	require.NotEqual(t, b.STag(), b2.STag())
	require.Equal(t, b.STag().Index(), b2.STag().Index())
	_, f = pd.Lookup(b.STag(), 0x1000, 8, RemoteRead)
	require.Equal(t, InvalidSTag, f)
	require.Equal(t, 1, r.Windows())

	_, prev, err = w.Bind(BindSpec{})
	require.NoError(t, err, "zero length unbinds a type 1 window")
	require.Equal(t, b2, prev)
	require.False(t, w.Bound())
	require.Equal(t, 0, r.Windows())
	_, f = pd.Lookup(b2.STag(), 0x1000+8, 8, RemoteRead)
	require.Equal(t, Invalidated, f)
}

// Verbs: ibv_dereg_mr fails with EBUSY while windows are bound, and a
// region with bound windows cannot be invalidated either.
func TestWindow_RegionBusyWhileBound(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	w := alloc(t, pd, WindowType2)
	q := &stream{1}
	b := bind(t, w, BindSpec{Region: r, Length: 64, Access: RemoteWrite, QP: q, Key: 3})

	err := r.Deregister()
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorIs(t, err, ErrWindowsBound)
	require.ErrorIs(t, r.Invalidate(), ErrWindowsBound)
	require.Equal(t, BoundWindows, pd.Invalidate(r.STag()))
	require.Equal(t, CannotInvalidate, pd.RemoteInvalidate(r.STag()))
	require.Equal(t, StateValid, r.State())
	require.ErrorIs(t, b.Deregister(), ErrIsWindow)
	_, err = b.Revalidate()
	require.ErrorIs(t, err, ErrIsWindow)

	require.Equal(t, b, w.Invalidate())
	require.Nil(t, w.Invalidate())
	require.NoError(t, r.Invalidate())
	_, err = r.Revalidate()
	require.NoError(t, err)
	b = bind(t, w, BindSpec{Region: r, Length: 64, Access: RemoteWrite, QP: q, Key: 4})
	prev, err := w.Free()
	require.NoError(t, err)
	require.Equal(t, b, prev)
	require.NoError(t, r.Deregister())
	_, _, err = w.Bind(BindSpec{Region: r, Length: 1, Access: RemoteWrite, QP: q, Key: 5})
	require.ErrorIs(t, err, ErrDeregistered)
}

// Binding and invalidating the region decide against each other: from many
// goroutines, either the bind fails or the invalidation does, never both
// succeed.
func TestWindow_BindRacesRegionInvalidate(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	for range 200 {
		r, _ := bindable(t, pd, 64)
		w := alloc(t, pd, WindowType1)
		var bindErr, invErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, _, bindErr = w.Bind(BindSpec{Region: r, Length: 8, Access: RemoteRead}) }()
		go func() { defer wg.Done(); invErr = r.Invalidate() }()
		wg.Wait()
		require.True(t, (bindErr == nil) != (invErr == nil), "bind %v, invalidate %v", bindErr, invErr)
		require.Equal(t, bindErr == nil, w.Bound())
		_, _ = w.Free()
	}
}

// Lookups racing an invalidation and rebinds of the window only ever get
// bytes of the binding their STag names, and after Invalidate returned and
// the remote uses drained, none succeeds.
func TestWindow_ConcurrentLookupsStayInside(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, buf := bindable(t, pd, 4096)
	w := alloc(t, pd, WindowType1)
	bind(t, w, BindSpec{Region: r, Offset: 1024, Length: 1024, Access: RemoteWrite, ZeroBased: true})
	win := buf[1024:2048]
	var stop atomic.Bool
	var wg sync.WaitGroup
	var hits atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				s := w.STag()
				to := uint64((i*64 + g*8) % 1024)
				x, got, f := pd.LookupRemoteFrom(s, to, 64, RemoteWrite, nil)
				if f != OK {
					continue
				}
				hits.Add(1)
				if !inside(win, got) {
					t.Errorf("lookup of %v at %d escaped the window", s, to)
				}
				x.ReleaseRemote()
			}
		}()
	}
	for hits.Load() == 0 {
		runtime.Gosched()
	}
	for range 300 {
		_, prev, err := w.Bind(BindSpec{Region: r, Offset: 1024, Length: 1024, Access: RemoteWrite, ZeroBased: true})
		require.NoError(t, err)
		if prev != nil {
			for prev.RemoteUses() > 0 {
				runtime.Gosched()
			}
		}
	}
	b := w.Invalidate()
	require.NotNil(t, b)
	for b.RemoteUses() > 0 {
		runtime.Gosched()
	}
	s := b.STag()
	_, _, f := pd.LookupRemoteFrom(s, 0, 1, RemoteWrite, nil)
	require.Equal(t, Invalidated, f)
	stop.Store(true)
	wg.Wait()
	require.Positive(t, hits.Load())
}

// A lookup through a window is as cheap as one through a region.
func TestWindow_LookupDoesNotAllocate(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r, _ := bindable(t, pd, 64)
	w := alloc(t, pd, WindowType2)
	q := &stream{1}
	b := bind(t, w, BindSpec{Region: r, Length: 64, Access: RemoteWrite, QP: q, Key: 9})
	var qa any = q
	n := testing.AllocsPerRun(100, func() {
		x, _, f := pd.LookupRemoteFrom(b.STag(), 0x1000, 8, RemoteWrite, qa)
		if f == OK {
			x.ReleaseRemote()
		}
	})
	require.Zero(t, n)
}

// FuzzWindowLookup: whatever the bind and the access, a lookup through the
// window succeeds exactly when the access lies inside the window and
// returns those bytes of the region, never others.
func FuzzWindowLookup(f *testing.F) {
	f.Add(uint64(16), uint64(32), false, uint64(0x1000+16), uint64(32), uint8(RemoteRead))
	f.Add(uint64(0), uint64(64), true, uint64(63), uint64(2), uint8(RemoteWrite))
	f.Add(uint64(8), uint64(8), true, ^uint64(0), uint64(1), uint8(RemoteAtomic))
	f.Fuzz(func(t *testing.T, off, n uint64, zero bool, to, length uint64, need uint8) {
		tab := newTable(t)
		pd := tab.NewPD()
		r, buf := bindable(t, pd, 64)
		w := alloc(t, pd, WindowType1)
		b, _, err := w.Bind(BindSpec{Region: r, Offset: off, Length: n, Access: RemoteRead | RemoteWrite, ZeroBased: zero})
		if n == 0 {
			require.NoError(t, err)
			require.False(t, w.Bound())
			return
		}
		if !within(off, n, 64) {
			require.ErrorIs(t, err, ErrBadBind)
			return
		}
		require.NoError(t, err)
		base := uint64(0x1000) + off
		if zero {
			base = 0
		}
		got, fl := pd.Lookup(b.STag(), to, length, Access(need))
		ok := Access(RemoteRead|RemoteWrite).Has(Access(need)) && to <= ^uint64(0)-length &&
			to >= base && within(to-base, length, n)
		require.Equal(t, ok, fl == OK, "%v", fl)
		if ok {
			requireAliases(t, buf, got, off+(to-base), length)
		}
	})
}
