//go:build linux || darwin || freebsd

package pmemsink

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Open pre-faults a region up to the limit, and only then.
func TestOpen_PrefaultLimit(t *testing.T) {
	dir := memDir(t)
	const size = 1 << 20
	for _, c := range []struct {
		opts []Option
		want bool
	}{
		{nil, true}, // the default limit is far above 1 MiB
		{[]Option{WithPrefault(size)}, true},
		{[]Option{WithPrefault(size - 1)}, false},
		{[]Option{WithPrefault(0)}, false},
		{[]Option{WithPrefault(-1)}, false},
	} {
		s, err := Open(tpath(dir, "f"), size, c.opts...)
		require.NoError(t, err)
		require.Equal(t, c.want, s.Info().Prefaulted, "%d options", len(c.opts))
		require.NoError(t, s.Close())
	}
}

// Pre-faulting reads; it never changes what the file holds, on memory or
// on a disk.
func TestOpen_PrefaultKeepsContents(t *testing.T) {
	for name, dir := range map[string]func(testing.TB) string{"tmpfs": memDir, "disk": diskDir} {
		t.Run(name, func(t *testing.T) {
			path := tpath(dir(t), "f")
			want := make([]byte, 3<<20+100)
			for i := range want {
				want[i] = byte(i*7 + i>>12)
			}
			require.NoError(t, os.WriteFile(path, want, 0o600))
			s := openT(t, path, int64(len(want)), WithMode(ModeVolatile))
			require.True(t, s.Info().Prefaulted)
			require.True(t, bytes.Equal(want, s.Bytes()))
			require.NoError(t, s.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
		})
	}
}

// After a pre-faulting Open, writing every page of a tmpfs region takes
// (almost) no page faults; without it, about one per page. The control
// row shows the count sees the faults this test is about.
func TestOpen_PrefaultMapsPages(t *testing.T) {
	linuxOnly(t)
	dir := memDir(t)
	const pages = 2048
	faults := func(opts ...Option) int64 {
		s := openT(t, tpath(dir, "f"), pages*int64(os.Getpagesize()), opts...)
		mem := s.Bytes()
		before := minorFaults(t)
		require.NoError(t, Contain(func() error {
			for i := 0; i < len(mem); i += os.Getpagesize() {
				mem[i] = 1
			}
			return nil
		}))
		n := minorFaults(t) - before
		require.NoError(t, s.Close())
		require.NoError(t, os.Remove(tpath(dir, "f")))
		return n
	}
	require.Greater(t, faults(WithPrefault(0)), int64(pages/2), "without pre-faulting, a fault per page")
	require.Less(t, faults(), int64(pages/16), "pre-faulted at Open")
}

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return int64(ru.Minflt)
}
