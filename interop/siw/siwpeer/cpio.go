package siwpeer

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// newc cpio, the initramfs format: a 110-byte ASCII header per entry (magic
// and 13 eight-digit hex fields), the NUL-terminated name and the data,
// each padded to 4 bytes; the entry "TRAILER!!!" ends the archive.
const (
	cpioMagic   = "070701"
	cpioHeader  = 110
	cpioTrailer = "TRAILER!!!"
	maxCpioName = 4096
)

type cpioEntry struct {
	ino, mode, nlink, size, nameSize uint64
}

func parseCpioHeader(h []byte) (cpioEntry, error) {
	if string(h[:6]) != cpioMagic {
		return cpioEntry{}, fmt.Errorf("cpio: bad magic %q (want newc, %s)", h[:6], cpioMagic)
	}
	field := func(i int) (uint64, error) {
		return strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
	}
	var e cpioEntry
	for _, f := range []struct {
		i int
		p *uint64
	}{{0, &e.ino}, {1, &e.mode}, {4, &e.nlink}, {6, &e.size}, {11, &e.nameSize}} {
		v, err := field(f.i)
		if err != nil {
			return e, fmt.Errorf("cpio: bad header field %d: %v", f.i, err)
		}
		*f.p = v
	}
	if e.nameSize == 0 || e.nameSize > maxCpioName {
		return e, fmt.Errorf("cpio: name size %d", e.nameSize)
	}
	return e, nil
}

func pad4(n uint64) uint64 { return (4 - n%4) % 4 }

// safeJoin places an archive path under root (a leading "/" or ".." cannot
// climb out of it) and refuses one that would be written through a
// symbolic link the archive made: that could point anywhere.
func safeJoin(root, name string) (string, error) {
	clean := filepath.Clean("/" + name)
	if clean == "/" {
		return "", nil
	}
	dir := root
	parts := strings.Split(clean[1:], "/")
	for _, part := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, part)
		if st, err := os.Lstat(dir); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("cpio: %q goes through the symbolic link %s", name, dir)
		}
	}
	return filepath.Join(root, clean), nil
}

// extractCpio unpacks a newc archive (the guest's initramfs) into root:
// directories, regular files (hard links too) and symbolic links, with
// their permission bits. Other file types are skipped: the guest creates
// its device nodes itself.
func extractCpio(r io.Reader, root string) error {
	br := bufio.NewReaderSize(r, 1<<16)
	links := map[uint64][]string{} // hard links whose data is still to come
	h := make([]byte, cpioHeader)
	for {
		if _, err := io.ReadFull(br, h); err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
		e, err := parseCpioHeader(h)
		if err != nil {
			return err
		}
		name := make([]byte, e.nameSize+pad4(cpioHeader+e.nameSize))
		if _, err := io.ReadFull(br, name); err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
		n := strings.TrimRight(string(name[:e.nameSize]), "\x00")
		if n == cpioTrailer {
			return nil
		}
		dst, err := safeJoin(root, n)
		if err != nil {
			return err
		}
		data := io.LimitReader(br, int64(e.size))
		if err := extractEntry(dst, e, data, links); err != nil {
			return fmt.Errorf("cpio: %s: %w", n, err)
		}
		if _, err := io.Copy(io.Discard, data); err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
		if _, err := br.Discard(int(pad4(e.size))); err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
	}
}

func extractEntry(dst string, e cpioEntry, data io.Reader, links map[uint64][]string) error {
	if dst == "" {
		return nil
	}
	perm := os.FileMode(e.mode & 0o7777)
	switch e.mode & 0o170000 {
	case 0o040000:
		return os.MkdirAll(dst, perm|0o700)
	case 0o120000:
		target, err := io.ReadAll(data)
		if err != nil {
			return err
		}
		return os.Symlink(string(target), dst)
	case 0o100000:
		// newc gives the data of a hard-linked file with its last name.
		if e.nlink > 1 && e.size == 0 {
			links[e.ino] = append(links[e.ino], dst)
			return nil
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Chmod(dst, perm); err != nil {
			return err
		}
		for _, l := range links[e.ino] {
			if err := os.Link(dst, l); err != nil {
				return err
			}
		}
		delete(links, e.ino)
		return nil
	}
	return nil
}

// unpackRoot unpacks the guest's initramfs into root.
func unpackRoot(initrd, root string) error {
	f, err := os.Open(initrd)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := extractCpio(f, root); err != nil {
		return fmt.Errorf("unpacking %s: %w", initrd, err)
	}
	return nil
}
