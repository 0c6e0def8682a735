package pmemsink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HUGETLBFS_MAGIC (include/uapi/linux/magic.h); x/sys/unix lacks it.
const hugetlbfsMagic = 0x958458f6

func preallocate(fd int, size int64) error {
	for {
		err := unix.Fallocate(fd, 0, 0, size)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fillHoles(fd, size)
		}
		return err
	}
}

func fsBacking(fd int) (string, bool) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return "file", false
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC:
		return "tmpfs", true
	case unix.RAMFS_MAGIC:
		return "ramfs", true
	case hugetlbfsMagic:
		return "hugetlbfs", true
	}
	return "file", false
}

// mmapSync maps with MAP_SHARED_VALIDATE|MAP_SYNC: the kernel refuses
// (EOPNOTSUPP) unless the file is DAX, and pre-4.15 kernels refuse the
// mapping type (EINVAL).
func mmapSync(fd int, length uint64) ([]byte, error) {
	return unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED_VALIDATE|unix.MAP_SYNC)
}

type devDAX struct {
	size, align int64
}

// probeDevDAX checks that a character device is device DAX as PMDK's
// pmem2_get_type_from_stat does: /sys/dev/char/M:m/subsystem resolves to
// .../dax. Its size is /sys/dev/char/M:m/size; its alignment the device's
// align attribute (or its region's).
func probeDevDAX(st *unix.Stat_t) (devDAX, error) {
	dir := fmt.Sprintf("/sys/dev/char/%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
	sub, err := filepath.EvalSymlinks(dir + "/subsystem")
	if err != nil || filepath.Base(sub) != "dax" {
		return devDAX{}, errors.New("a character device that is not device DAX")
	}
	size, err := readSysInt(dir + "/size")
	if err != nil {
		return devDAX{}, fmt.Errorf("device DAX size: %w", err)
	}
	d := devDAX{size: size}
	for _, p := range []string{dir + "/device/align", dir + "/device/dax_region/align"} {
		if a, err := readSysInt(p); err == nil && a > 0 {
			d.align = a
			break
		}
	}
	return d, nil
}

func readSysInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// Kernels before 4.9 print the region alignment in hex.
	return strconv.ParseInt(strings.TrimSpace(string(b)), 0, 64)
}

// sysPopulateWrite pre-faults b writable (MADV_POPULATE_WRITE: dirties
// the shared pages but writes nothing). Kernels before 5.14 refuse it
// (EINVAL).
func sysPopulateWrite(b []byte) error {
	for {
		err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
		if err != unix.EINTR {
			return err
		}
	}
}
