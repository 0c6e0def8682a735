//go:build !unix

package lab

import (
	"os"
	"syscall"
)

// The lab runs its QEMU guest on Linux hosts; elsewhere it builds, and
// processes are started and ended without groups.
func groupAttr() *syscall.SysProcAttr { return nil }

func diesWithParent(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }

func killGroup(pid, _ int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
