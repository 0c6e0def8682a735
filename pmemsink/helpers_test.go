//go:build linux || darwin || freebsd

package pmemsink

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// Test-only options for the deliberate defects of testHooks and the DAX
// path on ordinary files.
func withHooks(h testHooks) Option      { return func(c *config) { c.hooks = &h } }
func withTestFlush(instr string) Option { return func(c *config) { c.testFlush = instr } }

// memDir returns a directory on tmpfs, or skips.
func memDir(t testing.TB) string {
	t.Helper()
	if b, _ := backingOf(t, "/dev/shm"); b != "tmpfs" {
		t.Skip("no tmpfs at /dev/shm")
	}
	d, err := os.MkdirTemp("/dev/shm", "pmemsink-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// diskDir returns a directory on a file system that is not memory, or
// skips.
// daxEnv names a directory on a DAX file system (ext4 -o dax on pmem)
// where the tests and benchmarks that need real DAX run; they skip, or
// leave the mode out, where it is not set, so that they never pretend on a
// machine without it. The interop suite sets it in the siw guest
// (interop/siw/dax_test.go).
const daxEnv = "IWARP_PMEM_DAX"

// daxRoot returns a fresh directory under $IWARP_PMEM_DAX, or skips.
func daxRoot(t testing.TB) string {
	t.Helper()
	root := os.Getenv(daxEnv)
	if root == "" {
		t.Skipf("%s is not set: no DAX file system to test on", daxEnv)
	}
	d, err := os.MkdirTemp(root, "pmemsink-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func diskDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if b, vol := backingOf(t, d); vol {
		t.Skipf("the test directory is on %s, not a disk", b)
	}
	return d
}

// backingOf reports what fsBacking says of a directory.
func backingOf(t testing.TB, dir string) (string, bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		return "", false
	}
	defer f.Close()
	return fsBacking(int(f.Fd()))
}

func openT(t testing.TB, path string, size int64, opts ...Option) *Sink {
	t.Helper()
	s, err := Open(path, size, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func tpath(dir, name string) string { return filepath.Join(dir, name) }

// linuxOnly skips assertions about Linux's MAP_SYNC and tmpfs elsewhere.
func linuxOnly(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("Linux behaviour")
	}
}
