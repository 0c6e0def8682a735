//go:build darwin || freebsd

package pmemsink

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// MAP_SYNC and device DAX are Linux's.
func mmapSync(int, uint64) ([]byte, error) {
	return nil, fmt.Errorf("%w: MAP_SYNC exists only on Linux", ErrUnsupported)
}

type devDAX struct {
	size, align int64
}

func probeDevDAX(*unix.Stat_t) (devDAX, error) {
	return devDAX{}, fmt.Errorf("%w: device DAX exists only on Linux", ErrUnsupported)
}

func fsBacking(fd int) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return "file", false
	}
	if unix.ByteSliceToString(st.Fstypename[:]) == "tmpfs" {
		return "tmpfs", true
	}
	return "file", false
}

// sysPopulateWrite: no such call here; prefault reads the pages instead.
func sysPopulateWrite([]byte) error { return ErrUnsupported }
