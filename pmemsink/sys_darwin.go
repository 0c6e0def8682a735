package pmemsink

import "golang.org/x/sys/unix"

// preallocate reserves the blocks past the end of the file with
// F_PREALLOCATE, extends it, and fills any holes. On APFS, a copy-on-write
// file system, later stores can still need space; nothing can prevent that.
func preallocate(fd int, size int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < size {
		fs := unix.Fstore_t{Flags: unix.F_ALLOCATEALL, Posmode: unix.F_PEOFPOSMODE, Length: size - st.Size}
		if err := unix.FcntlFstore(uintptr(fd), unix.F_PREALLOCATE, &fs); err == unix.ENOSPC {
			return err
		}
	}
	return fillHoles(fd, size)
}
