package stag

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

const regionLen = 4096

type lookupCase struct {
	name   string
	to     uint64 // relative to the region's base unless abs
	abs    bool
	length uint64
	need   Access
	want   Failure
}

// The Data Sink checks of DDP (RFC 5041 §7.1 by its table of contents; the
// RFC text was not available, the list's structure is from the RDMAC DDP 1.0
// draft §9.1 and the behaviour from siw_check_mem), plus the TO-wrap outcome
// that has its own code in the IANA registry. See docs/rfc-notes/stag.md.
func boundsCases() []lookupCase {
	return []lookupCase{
		{name: "whole region", to: 0, length: regionLen, want: OK},
		{name: "middle", to: 100, length: 200, want: OK},
		{name: "last byte", to: regionLen - 1, length: 1, want: OK},
		{name: "one past the end", to: regionLen - 1, length: 2, want: BaseBounds},
		{name: "length one too long", to: 0, length: regionLen + 1, want: BaseBounds},
		{name: "starts at the end", to: regionLen, length: 1, want: BaseBounds},
		{name: "zero length at the end", to: regionLen, length: 0, want: OK},
		{name: "zero length one past the end", to: regionLen + 1, length: 0, want: BaseBounds},
		{name: "zero length at the base", to: 0, length: 0, want: OK},
		{name: "huge length", to: 0, length: 1 << 40, want: BaseBounds},
		{name: "huge length mid", to: 10, length: 1 << 62, want: BaseBounds},
		{name: "far beyond", to: 1 << 40, length: 1, want: BaseBounds},
		{name: "TO max length 1 wraps", to: math.MaxUint64, abs: true, length: 1, want: TOWrap},
		{name: "TO+len == 2^64 wraps", to: math.MaxUint64 - 9, abs: true, length: 10, want: TOWrap},
		{name: "TO+len == 2^64-1 does not wrap", to: math.MaxUint64 - 9, abs: true, length: 9, want: BaseBounds},
		{name: "TO max length 0", to: math.MaxUint64, abs: true, length: 0, want: BaseBounds},
		{name: "length max from TO 1 wraps", to: 1, abs: true, length: math.MaxUint64, want: TOWrap},
	}
}

func runLookupCases(t *testing.T, pd *PD, r *Region, cases []lookupCase) {
	t.Helper()
	buf := r.Bytes()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			to := c.to
			if !c.abs {
				to += r.Base()
			}
			need := c.need
			if need == 0 {
				need = RemoteWrite
			}
			got, f := pd.Lookup(r.STag(), to, c.length, need)
			require.Equal(t, c.want, f, "to=%#x len=%#x", to, c.length)
			if f != OK {
				require.Nil(t, got)
				return
			}
			requireAliases(t, buf, got, to-r.Base(), c.length)
		})
	}
}

func TestLookup_RFC5041_7_1_Bounds(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	for _, b := range []Base{BaseZero(), BaseVA(), BaseAt(0x1000_0000_0000)} {
		t.Run(b.String(), func(t *testing.T) {
			r := register(t, pd, make([]byte, regionLen), LocalWrite|RemoteWrite, b)
			cases := boundsCases()
			wrap := TOWrap
			if r.Base() == 0 {
				wrap = BaseBounds // 0 + MaxUint64 fits: out of bounds, no wrap
			}
			cases = append(cases, lookupCase{name: "length max from base", to: 0, length: math.MaxUint64, want: wrap})
			runLookupCases(t, pd, r, cases)
		})
	}
}

// A region whose exclusive end is 2^64-1: every overrun of its end is a TO
// wrap, and the end itself is still a valid place for a zero-length access.
func TestLookup_RFC5041_7_1_TopOfTOSpace(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r := register(t, pd, make([]byte, regionLen), LocalWrite|RemoteWrite, BaseAt(math.MaxUint64-regionLen))
	runLookupCases(t, pd, r, []lookupCase{
		{name: "whole region", to: 0, length: regionLen, want: OK},
		{name: "last byte", to: math.MaxUint64 - 1, abs: true, length: 1, want: OK},
		{name: "zero length at the end", to: math.MaxUint64, abs: true, length: 0, want: OK},
		{name: "one past the end wraps", to: math.MaxUint64 - 1, abs: true, length: 2, want: TOWrap},
		{name: "length one too long wraps", to: 0, length: regionLen + 1, want: TOWrap},
		{name: "from the end wraps", to: math.MaxUint64, abs: true, length: 1, want: TOWrap},
		{name: "below base", to: math.MaxUint64 - regionLen - 1, abs: true, length: 1, want: BaseBounds},
		{name: "below base zero length", to: math.MaxUint64 - regionLen - 1, abs: true, length: 0, want: BaseBounds},
	})
}

// VA-based regions (what rping advertises): a TO below the buffer's address
// is a bounds violation, not a huge offset and not a wrap.
func TestLookup_RFC5041_7_1_BelowBaseVA(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	buf := make([]byte, regionLen)
	r := register(t, pd, buf, LocalWrite|RemoteWrite, BaseVA())
	require.NotZero(t, r.Base())
	require.Equal(t, r.Base(), r.TO(0))
	for _, c := range []struct {
		to, n uint64
	}{{r.Base() - 1, 1}, {r.Base() - 1, 2}, {r.Base() - 1, 0}, {0, 1}, {0, 0}, {r.Base() - regionLen, regionLen}} {
		_, f := pd.Lookup(r.STag(), c.to, c.n, RemoteWrite)
		require.Equal(t, BaseBounds, f, "to=%#x len=%d", c.to, c.n)
	}
	got, f := pd.Lookup(r.STag(), r.TO(10), 5, RemoteWrite)
	require.Equal(t, OK, f)
	requireAliases(t, buf, got, 10, 5)
}

func TestLookup_RFC5041_7_1_STag(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r := register(t, pd, make([]byte, 64), allAccess, BaseZero())
	s := r.STag()

	t.Run("every wrong key", func(t *testing.T) {
		for k := 0; k < 256; k++ {
			bad := MakeSTag(s.Index(), uint8(k))
			if bad == s {
				continue
			}
			_, f := pd.Lookup(bad, 0, 1, RemoteRead)
			require.Equal(t, InvalidSTag, f, "%v", bad)
		}
	})
	t.Run("unknown index", func(t *testing.T) {
		for _, bad := range []STag{s + 1<<KeyBits, s - 1<<KeyBits, MakeSTag(MaxIndex, s.Key())} {
			if bad.Index() == s.Index() {
				continue
			}
			_, f := pd.Lookup(bad, 0, 1, RemoteRead)
			require.Equal(t, InvalidSTag, f, "%v", bad)
		}
	})
	t.Run("reserved RTR STags", func(t *testing.T) {
		for _, bad := range []STag{0, 1, 0x1234, 0xabcd} {
			_, f := pd.Lookup(bad, 0, 0, 0)
			require.Equal(t, InvalidSTag, f, "%v", bad)
		}
	})
	t.Run("freed", func(t *testing.T) {
		r2 := register(t, pd, make([]byte, 64), allAccess, BaseZero())
		require.NoError(t, r2.Deregister())
		_, f := pd.Lookup(r2.STag(), 0, 1, RemoteRead)
		require.Equal(t, InvalidSTag, f)
		require.Equal(t, StateFree, r2.State())
	})
}

// The PD check is what makes "not associated with this stream" distinct from
// "invalid STag" (on the wire RDMAP 0/1/0x03, DDP 1/1/0x02: conn's mapping).
func TestLookup_RFC5041_7_1_WrongPD(t *testing.T) {
	tab := newTable(t)
	pd, other := tab.NewPD(), tab.NewPD()
	r := register(t, pd, make([]byte, 64), allAccess, BaseZero())
	_, f := other.Lookup(r.STag(), 0, 1, RemoteRead)
	require.Equal(t, PDMismatch, f)

	// A PD of another table does not see the region at all.
	foreign := newTable(t).NewPD()
	_, f = foreign.Lookup(r.STag(), 0, 1, RemoteRead)
	require.Equal(t, InvalidSTag, f)
}

func TestLookup_Invalidated(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	local := register(t, pd, make([]byte, 64), allAccess, BaseZero())
	remote := register(t, pd, make([]byte, 64), allAccess, BaseZero())
	require.NoError(t, local.Invalidate())
	require.Equal(t, OK, pd.RemoteInvalidate(remote.STag()))
	for _, r := range []*Region{local, remote} {
		_, f := pd.Lookup(r.STag(), 0, 1, RemoteRead)
		require.Equal(t, Invalidated, f)
	}
}

func TestLookup_MissingEachRight(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	for i, right := range []Access{LocalRead, LocalWrite, RemoteRead, RemoteWrite, RemoteAtomic} {
		t.Run(accessNames[i], func(t *testing.T) {
			a := allAccess &^ right
			if right == LocalWrite {
				a &^= RemoteWrite | RemoteAtomic
			}
			r := register(t, pd, make([]byte, 64), a, BaseZero())
			_, f := pd.Lookup(r.STag(), 0, 8, right)
			require.Equal(t, AccessRights, f)
			_, f = pd.CheckLocal(r, 0, 8, right)
			require.Equal(t, AccessRights, f)
			// Every right it does have passes.
			for j := 0; j < len(accessNames); j++ {
				if have := Access(1) << j; a.Has(have) {
					_, f = pd.Lookup(r.STag(), 0, 8, have)
					require.Equal(t, OK, f, "%v", have)
				}
			}
		})
	}
}

// When several rules fail, the first in Lookup's documented order wins, so
// the Terminate a peer sees does not depend on incidental detail.
func TestLookup_FailureOrder(t *testing.T) {
	tab := newTable(t)
	pd, other := tab.NewPD(), tab.NewPD()
	ro := register(t, pd, make([]byte, 64), LocalRead|RemoteRead, BaseAt(1000))
	inv := register(t, pd, make([]byte, 64), LocalRead|RemoteRead, BaseAt(1000))
	require.NoError(t, inv.Invalidate())

	cases := []struct {
		name  string
		pd    *PD
		s     STag
		to, n uint64
		need  Access
		want  Failure
	}{
		{"invalidated before PD", other, inv.STag(), 0, math.MaxUint64, RemoteWrite, Invalidated},
		{"PD before rights", other, ro.STag(), 0, math.MaxUint64, RemoteWrite, PDMismatch},
		{"rights before wrap", pd, ro.STag(), math.MaxUint64, 2, RemoteWrite, AccessRights},
		{"wrap before below-base", pd, ro.STag(), math.MaxUint64, 2, RemoteRead, TOWrap},
		{"below base", pd, ro.STag(), 999, 2, RemoteRead, BaseBounds},
	}
	for _, c := range cases {
		_, f := c.pd.Lookup(c.s, c.to, c.n, c.need)
		require.Equal(t, c.want, f, c.name)
	}
}

func TestRegister_Errors(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	_, err := pd.Register(nil, allAccess, BaseZero())
	require.ErrorIs(t, err, ErrEmptyRegion)
	_, err = pd.Register(make([]byte, 8), RemoteWrite, BaseZero())
	require.ErrorIs(t, err, ErrBadAccess)
	_, err = pd.Register(make([]byte, 8), allAccess, BaseAt(math.MaxUint64-7))
	require.ErrorIs(t, err, ErrBaseOverflow)
	r, err := pd.Register(make([]byte, 8), allAccess, BaseAt(math.MaxUint64-8))
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxUint64-1), r.TO(7))
	require.Equal(t, 1, tab.Len(), "failed registrations leave nothing behind")
}

func TestRegion_Accessors(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	buf := make([]byte, 100)
	r := register(t, pd, buf, LocalRead|RemoteRead, BaseAt(0x5000), NoRemoteInvalidate)
	require.Equal(t, pd, r.PD())
	require.Equal(t, tab, pd.Table())
	require.Equal(t, LocalRead|RemoteRead, r.Access())
	require.Equal(t, KindMemoryRegion, r.Kind())
	require.Equal(t, "MR", r.Kind().String())
	require.Equal(t, uint64(0x5000), r.Base())
	require.Equal(t, uint64(0x5010), r.TO(0x10))
	require.Equal(t, 100, r.Len())
	require.Equal(t, StateValid, r.State())
	require.False(t, r.AllowsRemoteInvalidate())
	require.Same(t, &buf[0], &r.Bytes()[0])
	require.Contains(t, r.String(), r.STag().String())
	require.Contains(t, r.String(), "valid")
	require.Equal(t, fmt.Sprintf("PD(%d)", pd.ID()), pd.String())
	require.Equal(t, "BaseVA", BaseVA().String())
	require.True(t, BaseVA().IsVA())
	require.False(t, BaseAt(0).IsVA())
	require.Equal(t, "BaseAt(0x0)", BaseZero().String())
	require.Equal(t, "State(9)", State(9).String())
	require.Equal(t, "Kind(3)", Kind(3).String())
}

// Post-time checks of local SGEs use the same overflow-safe bounds logic.
func TestCheckLocal(t *testing.T) {
	tab := newTable(t)
	pd, other := tab.NewPD(), tab.NewPD()
	buf := make([]byte, 256)
	r := register(t, pd, buf, LocalRead|LocalWrite, BaseVA())

	got, f := pd.CheckLocal(r, 0, 256, LocalWrite)
	require.Equal(t, OK, f)
	requireAliases(t, buf, got, 0, 256)
	got, f = pd.CheckLocal(r, 255, 1, LocalRead)
	require.Equal(t, OK, f)
	requireAliases(t, buf, got, 255, 1)
	got, f = pd.CheckLocal(r, 256, 0, LocalRead)
	require.Equal(t, OK, f)
	require.Len(t, got, 0)

	for _, c := range []struct{ off, n uint64 }{
		{255, 2}, {256, 1}, {257, 0}, {0, 257}, {1, math.MaxUint64}, {math.MaxUint64, 1}, {math.MaxUint64, 0},
	} {
		_, f = pd.CheckLocal(r, c.off, c.n, LocalRead)
		require.Equal(t, BaseBounds, f, "off=%#x len=%#x", c.off, c.n)
	}
	_, f = other.CheckLocal(r, 0, 1, LocalRead)
	require.Equal(t, PDMismatch, f)
	_, f = pd.CheckLocal(r, 0, 1, RemoteRead)
	require.Equal(t, AccessRights, f)
	require.NoError(t, r.Invalidate())
	_, f = pd.CheckLocal(r, 0, 1, LocalRead)
	require.Equal(t, Invalidated, f)
	require.NoError(t, r.Deregister())
	_, f = pd.CheckLocal(r, 0, 1, LocalRead)
	require.Equal(t, InvalidSTag, f)
}

func TestLookup_ZeroAllocs(t *testing.T) {
	tab := newTable(t)
	pd := tab.NewPD()
	r := register(t, pd, make([]byte, 4096), LocalWrite|RemoteWrite, BaseVA())
	s, to := r.STag(), r.TO(128)
	var sink []byte
	hit := testing.AllocsPerRun(1000, func() {
		b, f := pd.Lookup(s, to, 1024, RemoteWrite)
		if f != OK {
			panic(f)
		}
		sink = b
	})
	miss := testing.AllocsPerRun(1000, func() {
		if _, f := pd.Lookup(s^0x80, to, 1024, RemoteWrite); f != InvalidSTag {
			panic(f)
		}
		if _, f := pd.Lookup(s, to-1024, 1024, RemoteWrite); f != BaseBounds {
			panic(f)
		}
	})
	local := testing.AllocsPerRun(1000, func() {
		b, f := pd.CheckLocal(r, 0, 64, LocalWrite)
		if f != OK {
			panic(f)
		}
		sink = b
		if err := r.Acquire(); err != nil {
			panic(err)
		}
		r.Release()
	})
	_ = sink
	require.Zero(t, hit)
	require.Zero(t, miss)
	require.Zero(t, local)
}
