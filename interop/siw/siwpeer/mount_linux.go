package siwpeer

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

func bindHost(root string) error {
	for _, d := range hostBinds {
		dst := filepath.Join(root, d)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("/"+d, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting /%s: %v", d, err)
		}
	}
	return nil
}

func unbind(root string) {
	for i := len(hostBinds) - 1; i >= 0; i-- {
		_ = syscall.Unmount(filepath.Join(root, hostBinds[i]), syscall.MNT_DETACH)
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
