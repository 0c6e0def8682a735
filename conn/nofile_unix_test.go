//go:build linux || darwin

package conn

import (
	"fmt"
	"syscall"
	"testing"
)

// raiseNoFile raises RLIMIT_NOFILE to at least want (the hard limit too,
// which needs privilege) and returns what puts the old limits back.
func raiseNoFile(want uint64) (restore func(), err error) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		return nil, err
	}
	if old.Cur >= want {
		return func() {}, nil
	}
	raised := syscall.Rlimit{Cur: want, Max: max(old.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_NOFILE from %d (hard %d) to %d: %w", old.Cur, old.Max, want, err)
	}
	return func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }, nil
}

// Within the hard limit raising needs no privilege (the siw guest's scale
// runs rely on the other case, root above the hard limit); the restore
// puts the soft limit back, and a limit already high enough is left alone.
func TestRaiseNoFile(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Cur < 1024 {
		t.Skipf("soft RLIMIT_NOFILE %d: too low to lower for the test", orig.Cur)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	low := syscall.Rlimit{Cur: orig.Cur - 100, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	current := func() syscall.Rlimit {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}

	restore, err := raiseNoFile(orig.Cur - 50)
	if err != nil {
		t.Fatal(err)
	}
	if got := current(); got.Cur != orig.Cur-50 || got.Max != orig.Max {
		t.Fatalf("raised to %d (hard %d), want %d (hard %d)", got.Cur, got.Max, orig.Cur-50, orig.Max)
	}
	restore()
	if got := current(); got.Cur != low.Cur {
		t.Fatalf("restored to %d, want %d", got.Cur, low.Cur)
	}

	restore, err = raiseNoFile(low.Cur - 10)
	if err != nil {
		t.Fatal(err)
	}
	restore()
	if got := current(); got.Cur != low.Cur {
		t.Fatalf("a limit above what was asked moved to %d from %d", got.Cur, low.Cur)
	}
}
