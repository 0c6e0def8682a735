package siwpeer

import (
	"fmt"
	"os"
	"syscall"
)

// Exit statuses of the entry point's own failures; otherwise it exits with
// the guest program's status (128+N if signal N ended it).
const (
	ExitUsage     = 2   // unknown command, bad option, or an argument the entry point cannot map
	ExitPortInUse = 69  // a port a server needs is taken on the host
	ExitGuest     = 70  // the guest did not boot, lost its siw link, or stopped
	ExitTimeout   = 124 // --timeout ended the program
)

// failure is an error of the entry point itself, with its exit status.
type failure struct {
	code int
	msg  string
}

func (f *failure) Error() string { return f.msg }

func fail(code int, format string, args ...any) error {
	return &failure{code: code, msg: fmt.Sprintf(format, args...)}
}

// signalStatus is the shell's exit status for a process that signal name
// (as Go's syscall.Signal.String spells it) ended.
func signalStatus(name string) int {
	for n := syscall.Signal(1); n < 65; n++ {
		if n.String() == name {
			return 128 + int(n)
		}
	}
	return 128 + int(syscall.SIGKILL)
}

// relayed is the signal to pass on for the n-th (from 1) signal the entry
// point got: the same one first, SIGKILL after that (a second Ctrl-C, or a
// docker stop after a docker kill -s INT, ends a program that ignores the
// first).
func relayed(sig os.Signal, n int) syscall.Signal {
	if s, ok := sig.(syscall.Signal); ok && n == 1 {
		return s
	}
	return syscall.SIGKILL
}
