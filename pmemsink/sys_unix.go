//go:build linux || darwin || freebsd

package pmemsink

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

func openSink(path string, size int64, cfg *config) (s *Sink, err error) {
	fail := func(err error) error { return fmt.Errorf("pmemsink: open %s: %w", path, err) }
	const flags = unix.O_RDWR | unix.O_CLOEXEC
	created := false
	var fd int
	if cfg.noCreate {
		fd, err = unix.Open(path, flags, 0)
	} else {
		fd, err = unix.Open(path, flags|unix.O_CREAT|unix.O_EXCL, uint32(cfg.perm.Perm()))
		if err == nil {
			created = true
		} else if errors.Is(err, unix.EEXIST) {
			fd, err = unix.Open(path, flags, 0)
		}
	}
	if err != nil {
		return nil, fail(err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			if created {
				unix.Unlink(path)
			}
		}
	}()

	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fail(err)
	}
	page := pageSize()
	var f facts
	f.flushers = cpuFlushers()
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		dev, err := probeDevDAX(&st)
		if err != nil {
			return nil, fail(err)
		}
		if size == 0 {
			size = dev.size
		}
		if size > dev.size {
			return nil, fail(fmt.Errorf("size %d exceeds the device's %d bytes", size, dev.size))
		}
		if dev.align > 0 && size%dev.align != 0 {
			return nil, fail(fmt.Errorf("size %d is not a multiple of the device's alignment %d", size, dev.align))
		}
		f.devDAX, f.backing = true, "device-dax"
	case unix.S_IFREG:
		if size == 0 {
			if size = st.Size; size == 0 {
				return nil, fail(errors.New("the file is empty: give a size"))
			}
		}
		if err := preallocate(fd, size); err != nil {
			return nil, fail(fmt.Errorf("allocating %d bytes: %w", size, err))
		}
		f.backing, f.volatile = fsBacking(fd)
	default:
		return nil, fail(errors.New("not a regular file or a device-DAX character device"))
	}
	if size == 0 {
		return nil, fail(errors.New("size 0"))
	}

	mapLen := alignUp(uint64(size), page)
	var mapped []byte
	probe := func() error {
		m, err := mmapFile(fd, mapLen, true)
		if err == nil {
			mapped = m
		}
		return err
	}
	c, isTest, err := testChoice(cfg, f)
	if !isTest {
		c, err = choose(cfg.mode, f, probe)
	}
	if err != nil {
		if mapped != nil {
			unix.Munmap(mapped)
		}
		return nil, fail(err)
	}
	if mapped == nil {
		if mapped, err = mmapFile(fd, mapLen, false); err != nil {
			return nil, fail(err)
		}
	}
	s = &Sink{fd: fd, mapped: mapped, mem: mapped[:size], kind: c.kind, fl: c.fl, page: page,
		populateWrite: f.devDAX || c.kind == persistLines}
	s.gran = 1
	flush := "none"
	switch c.kind {
	case persistMsync, persistShadowMsync:
		s.gran, flush = page, "msync"
	case persistLines, persistShadowLines:
		s.gran, flush = uint64(c.fl.line), c.fl.name
		if c.kind == persistShadowLines {
			flush = "shadow write-back"
		}
	}
	if c.kind == persistShadowMsync {
		flush = "shadow msync"
	}
	s.info = Info{Path: path, Size: size, Mode: c.mode, Durable: c.durable && !isTest,
		Backing: c.backing, Flush: flush, Granularity: s.gran, Note: c.note}
	return s, nil
}

func mmapFile(fd int, length uint64, sync bool) ([]byte, error) {
	if sync {
		return mmapSync(fd, length)
	}
	return unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func sysMsync(b []byte) error { return unix.Msync(b, unix.MS_SYNC) }

func sysMunmap(b []byte) error { return unix.Munmap(b) }

// sysReserve replaces the mapping of b by an inaccessible anonymous one at
// the same address.
func sysReserve(b []byte) error {
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)),
		unix.PROT_NONE, unix.MAP_FIXED|unix.MAP_PRIVATE|unix.MAP_ANON)
	return err
}

func sysCloseFD(fd int) error { return unix.Close(fd) }

// fillHoles writes zeros into every hole of the file's first size bytes
// (holes read as zeros, so contents do not change), so that storing into
// the mapping never has to allocate: the portable fallback where the file
// system has no fallocate. A file system that cannot report holes
// (SEEK_HOLE fails with EINVAL) is taken as having none.
func fillHoles(fd int, size int64) error {
	var cur unix.Stat_t
	if err := unix.Fstat(fd, &cur); err != nil {
		return err
	}
	if cur.Size < size {
		if err := unix.Ftruncate(fd, size); err != nil {
			return err
		}
	}
	var zeros []byte
	for off := int64(0); off < size; {
		hole, err := unix.Seek(fd, off, unix.SEEK_HOLE)
		switch {
		case errors.Is(err, unix.ENXIO), errors.Is(err, unix.EINVAL):
			return nil
		case err != nil:
			return err
		}
		if hole >= size {
			return nil
		}
		data, err := unix.Seek(fd, hole, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			data = size
		} else if err != nil {
			return err
		}
		end := min(data, size)
		if zeros == nil {
			zeros = make([]byte, 1<<20)
		}
		for p := hole; p < end; {
			n, err := unix.Pwrite(fd, zeros[:min(int64(len(zeros)), end-p)], p)
			if err != nil {
				return err
			}
			p += int64(n)
		}
		off = end
	}
	return nil
}
