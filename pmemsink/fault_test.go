//go:build linux || darwin || freebsd

package pmemsink

import (
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// truncatedSink maps a four-page file and truncates it to one page under
// the mapping: touching pages 1–3 raises SIGBUS.
func truncatedSink(t *testing.T, dir string, opts ...Option) *Sink {
	t.Helper()
	page := int64(pageSize())
	p := tpath(dir, "trunc")
	s := openT(t, p, 4*page, opts...)
	s.Bytes()[0] = 1
	require.NoError(t, os.Truncate(p, page))
	return s
}

// A store or load past the end of a truncated file is a clean error, on
// tmpfs and on disk, and the sink keeps working where the file still is.
func TestFault_TruncatedFile(t *testing.T) {
	for name, dir := range map[string]func(testing.TB) string{"tmpfs": memDir, "disk": diskDir} {
		t.Run(name, func(t *testing.T) {
			s := truncatedSink(t, dir(t))
			page := pageSize()
			b := s.Bytes()
			err := Contain(func() error {
				b[2*page+5] = 9
				return nil
			})
			require.ErrorIs(t, err, ErrFault)
			var fe *FaultError
			require.True(t, errors.As(err, &fe))
			require.Equal(t, 2*page+5, fe.Off)
			require.Equal(t, s.Info().Path, fe.Path)
			var re runtime.Error
			require.True(t, errors.As(err, &re), "the runtime error is kept")

			var got byte
			err = s.Guard(func() error {
				got = b[3*page]
				return nil
			})
			require.ErrorIs(t, err, ErrFault)
			require.Zero(t, got)

			// What lies inside the file still works, and fn's own error
			// comes back as it is.
			mine := errors.New("mine")
			require.Equal(t, mine, s.Guard(func() error { b[10] = 1; return mine }))
			require.Equal(t, byte(1), b[10])
		})
	}
}

// A nil pointer dereference is not a sink's fault: it propagates.
func TestFault_NilDereferencePanics(t *testing.T) {
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = Contain(func() error {
			var p *[8]byte
			p[3] = 1
			return nil
		})
	}()
	require.NotNil(t, recovered, "the panic propagated")
	re, ok := recovered.(runtime.Error)
	require.True(t, ok)
	require.Contains(t, re.Error(), "nil pointer dereference")
	var fe *FaultError
	require.False(t, errors.As(re, &fe))
}

// A fault in memory that is not a sink's propagates even with
// panic-on-fault set: an unmapped page of our own.
func TestFault_ForeignMappingPanics(t *testing.T) {
	m, err := unix.Mmap(-1, 0, int(pageSize()), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	defer unix.Munmap(m)
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = Contain(func() error {
			m[1] = 1
			return nil
		})
	}()
	require.NotNil(t, recovered)
	af, ok := recovered.(interface{ Addr() uintptr })
	require.True(t, ok)
	require.Equal(t, uintptr(unsafe.Pointer(&m[1])), af.Addr())
}

// Guard covers only its own sink; Contain covers every sink.
func TestFault_GuardIsPerSink(t *testing.T) {
	dir := memDir(t)
	a := openT(t, tpath(dir, "a"), 4096)
	b := truncatedSink(t, dir)
	off := 2 * pageSize()
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = a.Guard(func() error { b.Bytes()[off] = 1; return nil })
	}()
	require.NotNil(t, recovered, "a's guard does not swallow b's fault")
	require.ErrorIs(t, Contain(func() error { b.Bytes()[off] = 1; return nil }), ErrFault)
}

// The goroutine's panic-on-fault setting is restored, also after a fault.
func TestFault_RestoresSetting(t *testing.T) {
	s := truncatedSink(t, memDir(t))
	off := 2 * pageSize()
	prev := debug.SetPanicOnFault(false)
	defer debug.SetPanicOnFault(prev)
	require.NoError(t, Contain(func() error { return nil }))
	require.False(t, debug.SetPanicOnFault(false))
	require.Error(t, Contain(func() error { s.Bytes()[off] = 1; return nil }))
	require.False(t, debug.SetPanicOnFault(true))
	require.Error(t, Contain(func() error { s.Bytes()[off] = 1; return nil }))
	require.True(t, debug.SetPanicOnFault(false), "a caller's own setting survives")
}

// The kernel reports the same fault to a system call as EFAULT; AsFault
// makes it the same error.
func TestFault_EFAULTFromSyscall(t *testing.T) {
	s := truncatedSink(t, diskDir(t))
	page := pageSize()
	var p [2]int
	require.NoError(t, unix.Pipe(p[:]))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	mem := s.Bytes()[2*page : 2*page+16]
	_, err := unix.Write(p[1], mem)
	require.ErrorIs(t, err, syscall.EFAULT)
	err = AsFault(err, mem)
	require.ErrorIs(t, err, ErrFault)
	var fe *FaultError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, 2*page, fe.Off)

	require.Equal(t, syscall.EIO, AsFault(syscall.EIO, mem))
	require.Equal(t, syscall.EFAULT, AsFault(syscall.EFAULT, make([]byte, 4)), "not a sink's memory")
	require.NoError(t, AsFault(nil, mem))
}

// A persist that faults (a DAX flush over a truncated page) fails the
// flush instead of the process.
func TestFault_PersistOverTruncatedPage(t *testing.T) {
	fls := cpuFlushers()
	if len(fls) == 0 {
		t.Skip("no cache-line write-back instruction")
	}
	s := truncatedSink(t, memDir(t), withTestFlush(fls[0].name))
	err := s.Persist(2*pageSize(), 64)
	require.ErrorIs(t, err, ErrFault)
	require.ErrorIs(t, s.Persist(0, 1), ErrFault, "and the sink is failed")
}

// A tracker that never detaches does not keep Close waiting past its
// timeout; its late accesses fault inside a reservation and are contained;
// its Detach releases the reservation.
func TestFault_CloseWithStuckTracker(t *testing.T) {
	s, err := Open(tpath(memDir(t), "f"), 1<<16, WithCloseTimeout(20*time.Millisecond))
	require.NoError(t, err)
	tr, err := s.Attach(func() {}) // asked to stop, does nothing
	require.NoError(t, err)
	b := s.Bytes()
	start := time.Now()
	err = s.Close()
	require.ErrorContains(t, err, "1 trackers still attached")
	require.Less(t, time.Since(start), 5*time.Second)
	err = Contain(func() error { b[100] = 1; return nil })
	require.ErrorIs(t, err, ErrFault)
	require.NotNil(t, owner(uintptr(unsafe.Pointer(&b[0]))))
	require.NoError(t, tr.Detach())
	require.Nil(t, owner(uintptr(unsafe.Pointer(&b[0]))), "the reservation is gone with the last tracker")
}

func TestContain_DoesNotAllocate(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 4096)
	b := s.Bytes()
	n := testing.AllocsPerRun(1000, func() {
		_ = Contain(func() error { b[7]++; return nil })
		_ = s.Guard(func() error { b[8]++; return nil })
	})
	require.Zero(t, n)
}
