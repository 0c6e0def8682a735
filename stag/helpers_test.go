package stag

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func newTable(t testing.TB, opts ...TableOption) *Table {
	t.Helper()
	tab, err := NewTable(opts...)
	require.NoError(t, err)
	return tab
}

func register(t testing.TB, pd *PD, buf []byte, a Access, b Base, opts ...RegisterOption) *Region {
	t.Helper()
	r, err := pd.Register(buf, a, b, opts...)
	require.NoError(t, err)
	return r
}

// requireAliases asserts that got is exactly buf[off:off+n] with capacity n:
// the same memory, not a copy, and no way to append past the range.
func requireAliases(t testing.TB, buf, got []byte, off, n uint64) {
	t.Helper()
	require.Equal(t, int(n), len(got))
	require.Equal(t, int(n), cap(got))
	if n > 0 {
		require.Equal(t, unsafe.Pointer(&buf[off]), unsafe.Pointer(unsafe.SliceData(got)))
	}
}

// inside reports whether got lies entirely within buf.
func inside(buf, got []byte) bool {
	if len(got) == 0 {
		return true
	}
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	g := uintptr(unsafe.Pointer(unsafe.SliceData(got)))
	return g >= b && g+uintptr(len(got)) <= b+uintptr(len(buf))
}

// tableSlots returns the size of the table's current slot array.
func tableSlots(tab *Table) int { return len(tab.slots.Load().slots) }

// checkTable verifies the hash table's invariants: the counts match the
// slots, the array is at most half full, every live region is reachable by
// load and sits on an unbroken probe path from its home slot, no index is
// there twice, and no freed region is still published.
func checkTable(t testing.TB, tab *Table) {
	t.Helper()
	tab.mu.Lock()
	defer tab.mu.Unlock()
	a := tab.slots.Load()
	n := len(a.slots)
	require.Equal(t, n&(n-1), 0, "size %d not a power of two", n)
	require.GreaterOrEqual(t, n, minSlots)
	used, live := 0, 0
	seen := map[uint32]bool{}
	mask := uint32(n - 1)
	for j := range a.slots {
		r := a.slots[j].Load()
		if r == nil {
			continue
		}
		used++
		if r == deleted {
			continue
		}
		live++
		require.NotEqual(t, StateFree, r.State(), "freed region still published")
		require.False(t, seen[r.index], "index %#x published twice", r.index)
		seen[r.index] = true
		require.Same(t, r, tab.load(r.index))
		for i := r.index; i&mask != uint32(j); i++ {
			require.NotNil(t, a.slots[i&mask].Load(), "probe path of %#x broken", r.index)
		}
	}
	require.Equal(t, tab.used, used)
	require.Equal(t, tab.count, live)
	require.LessOrEqual(t, 2*used, n)
}
