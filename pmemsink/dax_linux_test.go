package pmemsink

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// daxEnv names a directory on a file system mounted with -o dax (real or
// emulated persistent memory). The tests that assert DAX mode run only
// where it is set (daxEnv, daxRoot).
func daxDir(t *testing.T) string { return daxRoot(t) }

// vmFlags returns the VmFlags of the mapping in /proc/self/smaps that holds
// addr.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := smapsRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return nil
}

// smapsRange parses a mapping's header line, "lo-hi perms …".
func smapsRange(line string) (lo, hi uintptr, ok bool) {
	r, _, found := strings.Cut(line, " ")
	a, b, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(a, 16, 64)
	h, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}

func flusherNames(fls []flusher) []string {
	n := make([]string, len(fls))
	for i, f := range fls {
		n[i] = f.name
	}
	return n
}

// On a DAX file system, auto picks DAX: the MAP_SYNC probe succeeds, the
// probe's mapping is the sink's (the kernel marks it VM_SYNC, "sf" in
// smaps), and Persist uses the best write-back instruction CPUID offers,
// which must be CLWB or CLFLUSHOPT (a CPU with only CLFLUSH fails here).
func TestDAX_AutoPicksDAX(t *testing.T) {
	s := openT(t, tpath(daxDir(t), "f"), 4<<20)
	in := s.Info()
	t.Logf("DAX sink: %s; CPUID offers %v", in, flusherNames(cpuFlushers()))
	require.Equal(t, ModeDAX, in.Mode, "%s", in)
	require.Equal(t, "fsdax", in.Backing)
	require.True(t, in.Durable)
	require.True(t, s.Durable())
	fls := cpuFlushers()
	require.NotEmpty(t, fls)
	require.Equal(t, fls[0].name, in.Flush, "the best instruction")
	require.Contains(t, []string{"clwb", "clflushopt"}, in.Flush)
	require.Equal(t, uint64(fls[0].line), in.Granularity, "one cache line")
	require.Empty(t, in.Note)
	require.Contains(t, vmFlags(t, uintptr(unsafe.Pointer(&s.Bytes()[0]))), "sf", "a MAP_SYNC mapping")
}

// A requested dax is granted on a DAX file system.
func TestDAX_Requested(t *testing.T) {
	s := openT(t, tpath(daxDir(t), "f"), 1<<20, WithMode(ModeDAX))
	in := s.Info()
	require.Equal(t, ModeDAX, in.Mode)
	require.Equal(t, "fsdax", in.Backing)
	require.True(t, in.Durable)
}

// Bytes stored into the mapping and persisted with the line write-backs
// are the file's bytes: after Close, another Open and a plain read see them.
func TestDAX_PersistedBytesAreTheFile(t *testing.T) {
	p := tpath(daxDir(t), "f")
	const size = 1 << 20
	s, err := Open(p, size)
	require.NoError(t, err)
	require.Equal(t, ModeDAX, s.Info().Mode)
	b := s.Bytes()
	for i := range b {
		b[i] = byte(i*13 + 1)
	}
	require.NoError(t, s.Persist(0, size))
	copy(b[4095:], "across a page and a line")
	require.NoError(t, s.PersistRanges([]Range{{4095, 24}, {100, 1}, {size - 1, 1}}))
	require.NoError(t, s.Close())

	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*13 + 1)
	}
	copy(want[4095:], "across a page and a line")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the file holds what was persisted")

	s2 := openT(t, p, size)
	require.Equal(t, ModeDAX, s2.Info().Mode)
	require.True(t, bytes.Equal(want, s2.Bytes()), "a new mapping of the file sees it")
}

// Each instruction CPUID offers persists DAX memory (the test override
// selects one; the sink then never calls itself durable).
func TestDAX_EachInstruction(t *testing.T) {
	dir := daxDir(t)
	for _, fl := range cpuFlushers() {
		t.Run(fl.name, func(t *testing.T) {
			s := openT(t, tpath(dir, fl.name), 1<<20, withTestFlush(fl.name))
			require.Equal(t, fl.name, s.Info().Flush)
			require.False(t, s.Durable())
			b := s.Bytes()
			for i := range b {
				b[i] = byte(i * 7)
			}
			require.NoError(t, s.Persist(0, 1<<20))
			require.NoError(t, s.PersistRanges([]Range{{1, 200}, {70000, 9000}}))
			for i := range b {
				if b[i] != byte(i*7) {
					t.Fatalf("byte %d changed", i)
				}
			}
		})
	}
}
