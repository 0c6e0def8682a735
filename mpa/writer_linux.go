package mpa

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIOV is the most iovecs one writev takes (Linux IOV_MAX).
const maxIOV = 1024

// writevState is what TryFlush needs on a socket: the socket, reusable
// iovecs, and the callback RawConn.Write runs (made once, so that TryFlush
// does not allocate).
type writevState struct {
	raw syscall.RawConn
	iov []unix.Iovec
	fn  func(fd uintptr) bool
	n   int
	err error
}

// initWritev enables TryFlush when the underlying writer exposes its socket.
func (w *Writer) initWritev() {
	if sc, ok := w.w.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.wv.raw = rc
			w.wv.fn = w.writevNow
		}
	}
}

// tryWritev makes one non-blocking writev of the queued iovecs (at most
// maxIOV of them) and returns the bytes written; tried is false when the
// writer has no socket and nothing was attempted.
func (w *Writer) tryWritev() (n int, tried bool, err error) {
	if w.wv.raw == nil {
		return 0, false, nil
	}
	w.wv.iov = w.wv.iov[:0]
	for _, b := range w.bufs {
		if len(b) == 0 {
			continue
		}
		if len(w.wv.iov) == maxIOV {
			break
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		w.wv.iov = append(w.wv.iov, v)
	}
	w.wv.n, w.wv.err = 0, nil
	err = w.wv.raw.Write(w.wv.fn)
	clear(w.wv.iov) // drop the references to queued memory
	if err == nil {
		err = w.wv.err
	}
	return w.wv.n, true, err
}

// writevNow is RawConn.Write's callback: one non-blocking writev; EAGAIN
// just means nothing was written. It never asks to wait.
//
// One iovec goes out with write: the kernel's writev path imports and
// checks the iovec array first, which for a small FPDU costs more than the
// copy. The Errno comparisons are direct, not errors.Is: this is the
// hottest path of a round trip.
func (w *Writer) writevNow(fd uintptr) bool {
	for {
		var n uintptr
		var e unix.Errno
		if len(w.wv.iov) == 1 {
			n, _, e = unix.Syscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(w.wv.iov[0].Base)), uintptr(w.wv.iov[0].Len))
		} else {
			n, _, e = unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.wv.iov[0])), uintptr(len(w.wv.iov)))
		}
		switch e {
		case 0:
			w.wv.n = int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			w.wv.err = e
		}
		return true
	}
}
