package lab

import "syscall"

// groupAttr starts a process in a process group of its own, so that its
// children can be signalled with it.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// diesWithParent makes the kernel kill the process when this one dies.
func diesWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Pdeathsig = syscall.SIGKILL
	return a
}

// killGroup signals the process group of pid.
func killGroup(pid, sig int) error { return syscall.Kill(-pid, syscall.Signal(sig)) }
