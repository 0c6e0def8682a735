//go:build !linux

package siwpeer

import (
	"errors"
	"os"
)

// Host-siw mode needs Linux (bind mounts, a siw kernel module).
func bindHost(string) error { return errors.ErrUnsupported }

func unbind(string) {}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
