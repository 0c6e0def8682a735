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
