package pmemsink

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// preallocate uses posix_fallocate(2), which returns its error as the
// system call's value; ZFS, which cannot reserve blocks, answers EINVAL
// and gets the hole-filling fallback.
func preallocate(fd int, size int64) error {
	for {
		r, _, e := unix.Syscall(unix.SYS_POSIX_FALLOCATE, uintptr(fd), 0, uintptr(size))
		err := syscall.Errno(r)
		if e != 0 {
			err = e
		}
		switch err {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.EINVAL, unix.EOPNOTSUPP, unix.ENODEV:
			return fillHoles(fd, size)
		}
		return err
	}
}
