//go:build unix && !linux

package lab

import "syscall"

func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// diesWithParent: only Linux has a parent-death signal; the lab's QEMU
// runs on Linux hosts.
func diesWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }

func killGroup(pid, sig int) error { return syscall.Kill(-pid, syscall.Signal(sig)) }
