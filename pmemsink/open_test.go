//go:build linux || darwin || freebsd

package pmemsink

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// On tmpfs, auto detects volatile and never claims durability.
func TestOpen_TmpfsIsVolatile(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 1<<20)
	in := s.Info()
	require.Equal(t, ModeVolatile, in.Mode)
	require.False(t, in.Durable)
	require.False(t, s.Durable())
	require.Equal(t, "tmpfs", in.Backing)
	require.Equal(t, "none", in.Flush)
	require.Contains(t, in.Note, "nothing survives power loss")
	require.Equal(t, uint64(1), s.Granularity())
	require.NoError(t, s.Persist(0, 1<<20))
}

// On a disk file system without DAX, auto probes MAP_SYNC, is refused, and
// persists with page-aligned msync.
func TestOpen_DiskIsMsync(t *testing.T) {
	linuxOnly(t)
	s := openT(t, tpath(diskDir(t), "f"), 1<<20)
	in := s.Info()
	require.Equal(t, ModeMsync, in.Mode)
	require.True(t, in.Durable)
	require.Equal(t, "file", in.Backing)
	require.Equal(t, "msync", in.Flush)
	require.Equal(t, pageSize(), in.Granularity)
	require.Contains(t, in.Note, "MAP_SYNC: operation not supported")
	require.Contains(t, in.String(), "msync on file")
}

// A requested dax fails with a message naming the file and the MAP_SYNC
// error, and leaves no file behind.
func TestOpen_RequestedDAXIsVerified(t *testing.T) {
	linuxOnly(t)
	for name, dir := range map[string]func(testing.TB) string{"tmpfs": memDir, "disk": diskDir} {
		t.Run(name, func(t *testing.T) {
			p := tpath(dir(t), "dax")
			_, err := Open(p, 1<<20, WithMode(ModeDAX))
			require.Error(t, err)
			require.Contains(t, err.Error(), p)
			require.Contains(t, err.Error(), "MAP_SYNC")
			require.ErrorIs(t, err, syscall.EOPNOTSUPP)
			_, statErr := os.Stat(p)
			require.True(t, errors.Is(statErr, os.ErrNotExist), "the file Open created is removed")
		})
	}
}

// msync requested on tmpfs runs but reports itself volatile.
func TestOpen_MsyncOnTmpfsIsNotDurable(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 1<<16, WithMode(ModeMsync))
	in := s.Info()
	require.Equal(t, ModeMsync, in.Mode)
	require.False(t, in.Durable)
	require.Contains(t, in.Note, "msync runs, but tmpfs is memory")
	require.NoError(t, s.Persist(10, 5000))
}

func TestOpen_VolatileRequested(t *testing.T) {
	s := openT(t, tpath(diskDir(t), "f"), 1<<16, WithMode(ModeVolatile))
	require.Equal(t, ModeVolatile, s.Info().Mode)
	require.False(t, s.Durable())
}

// The region is the file's bytes: existing contents are served as they
// are, writes land at the same offsets, and nothing else is written.
func TestOpen_RegionIsTheFile(t *testing.T) {
	dir := diskDir(t)
	p := tpath(dir, "f")
	orig := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes, not page-aligned
	require.NoError(t, os.WriteFile(p, orig, 0o600))

	s, err := Open(p, 0, WithoutCreate())
	require.NoError(t, err)
	require.Equal(t, int64(len(orig)), s.Size())
	require.Equal(t, orig, s.Bytes())
	copy(s.Bytes()[4095:], "XYZ")
	require.NoError(t, s.Persist(4095, 3))
	require.NoError(t, s.Close())

	got, err := os.ReadFile(p)
	require.NoError(t, err)
	want := append([]byte(nil), orig...)
	copy(want[4095:], "XYZ")
	require.Equal(t, want, got, "byte N of the region is byte N of the file, nothing added")

	// Growing: the file is extended with zeros to exactly the size.
	s, err = Open(p, 20000)
	require.NoError(t, err)
	require.Equal(t, want, s.Bytes()[:len(want)])
	require.Equal(t, make([]byte, 20000-len(want)), s.Bytes()[len(want):])
	require.NoError(t, s.Close())
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, int64(20000), st.Size())

	// A smaller size serves a prefix and leaves the rest of the file alone.
	s, err = Open(p, 100)
	require.NoError(t, err)
	require.Equal(t, want[:100], s.Bytes())
	require.ErrorIs(t, s.Persist(90, 11), ErrRange)
	require.NoError(t, s.Close())
	st, err = os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, int64(20000), st.Size())
}

// Pre-allocation: no space means Open fails, not a later SIGBUS. tmpfs
// checks its size limit before allocating anything.
func TestOpen_NoSpaceFailsAtOpen(t *testing.T) {
	dir := memDir(t)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	if st.Blocks == 0 {
		t.Skip("tmpfs without a size limit")
	}
	p := tpath(dir, "big")
	total := int64(st.Blocks) * int64(st.Bsize)
	_, err := Open(p, total+1<<30)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Contains(t, err.Error(), "allocating")
	_, statErr := os.Stat(p)
	require.True(t, errors.Is(statErr, os.ErrNotExist))
}

// Open allocates every block: a sparse file gets its holes filled.
func TestOpen_AllocatesBlocks(t *testing.T) {
	dir := diskDir(t)
	p := tpath(dir, "sparse")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(8<<20))
	_, err = f.WriteAt([]byte("middle"), 4<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	blocks := func() int64 {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(p, &st))
		return st.Blocks * 512
	}
	require.Less(t, blocks(), int64(1<<20), "the file starts sparse")
	s := openT(t, p, 0)
	require.GreaterOrEqual(t, blocks(), int64(8<<20))
	require.Equal(t, "middle", string(s.Bytes()[4<<20:4<<20+6]))
}

// The hole-filling fallback (for file systems without fallocate) keeps
// the contents and allocates every block.
func TestFillHoles(t *testing.T) {
	p := tpath(diskDir(t), "sparse")
	f, err := os.Create(p)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(3<<20))
	_, err = f.WriteAt([]byte("keep"), 1<<20+5)
	require.NoError(t, err)
	require.NoError(t, fillHoles(int(f.Fd()), 5<<20+3))
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &st))
	require.Equal(t, int64(5<<20+3), st.Size)
	require.GreaterOrEqual(t, st.Blocks*512, int64(5<<20))
	got := make([]byte, 4)
	_, err = f.ReadAt(got, 1<<20+5)
	require.NoError(t, err)
	require.Equal(t, "keep", string(got))
}

func TestOpen_BadArguments(t *testing.T) {
	dir := diskDir(t)
	_, err := Open(tpath(dir, "missing"), 4096, WithoutCreate())
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = Open(tpath(dir, "neg"), -1)
	require.ErrorContains(t, err, "negative size")
	_, err = Open(tpath(dir, "empty"), 0)
	require.ErrorContains(t, err, "the file is empty")
	_, err = Open(dir, 4096)
	require.Error(t, err)
	_, err = Open("/dev/null", 4096)
	require.Error(t, err, "a character device that is not device DAX")
	_, err = Open(tpath(dir, "m"), 4096, WithMode(Mode(9)))
	require.ErrorContains(t, err, "unknown mode")
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeAuto, ModeDAX, ModeMsync, ModeVolatile} {
		got, err := ParseMode(strings.ToUpper(m.String()))
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, err := ParseMode("pmem")
	require.ErrorContains(t, err, "unknown mode")
}
