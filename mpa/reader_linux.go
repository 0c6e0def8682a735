package mpa

import (
	"io"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readvState is what a Reader on a socket needs for readv: the socket, the
// two iovecs and the callback RawConn.Read runs (made once, so that a
// direct read does not allocate).
type readvState struct {
	raw    syscall.RawConn
	iov    [2]unix.Iovec
	fn     func(fd uintptr) bool
	idleFn func(fd uintptr) bool
	n      int
	err    error
}

// initReadv enables readv when the underlying reader exposes its socket.
func (r *Reader) initReadv() {
	if sc, ok := r.r.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rv.raw = rc
			r.rv.fn = r.readvNow
			r.rv.idleFn = r.readIdleNow
		}
	}
}

// readDirect reads payload into p, bypassing the buffer; on a socket the
// bytes after p land in the (empty) buffer in the same system call.
func (r *Reader) readDirect(p []byte) (int, error) {
	if r.rv.raw == nil || r.buf == nil {
		return r.r.Read(p)
	}
	r.rp, r.wp = 0, 0
	r.rv.iov[0] = unix.Iovec{Base: &p[0]}
	r.rv.iov[0].SetLen(len(p))
	r.rv.iov[1] = unix.Iovec{Base: &r.buf[0]}
	r.rv.iov[1].SetLen(len(r.buf))
	r.rv.n, r.rv.err = 0, nil
	err := r.rv.raw.Read(r.rv.fn)
	r.rv.iov[0] = unix.Iovec{} // do not keep the caller's memory reachable
	if err == nil {
		err = r.rv.err
	}
	if err != nil {
		return 0, err
	}
	n := r.rv.n
	if n == 0 {
		return 0, io.EOF
	}
	if n > len(p) {
		r.wp = n - len(p)
		n = len(p)
	}
	return n, nil
}

// readvNow is RawConn.Read's callback: one readv, waiting (false) only
// while the socket has nothing to read.
func (r *Reader) readvNow(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&r.rv.iov[0])), uintptr(len(r.rv.iov)))
		switch e { // direct, not errors.Is: a hot path
		case 0:
			r.rv.n = int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.rv.err = e
		}
		return true
	}
}

// canAwaitIdle reports whether the Reader can wait for data without a
// buffer (ReleaseIdle): on a socket it can.
func (r *Reader) canAwaitIdle() bool { return r.rv.raw != nil }

// awaitIdle waits, holding no buffer, until the socket has data, then
// reads it into a buffer from the pool. Nothing is consumed unless a
// buffer takes it, so a deadline that cuts the wait short loses nothing.
func (r *Reader) awaitIdle() error {
	r.rv.n, r.rv.err = 0, nil
	err := r.rv.raw.Read(r.rv.idleFn)
	if err == nil {
		err = r.rv.err
	}
	if err != nil {
		return err
	}
	if r.rv.n == 0 {
		return io.EOF
	}
	r.rp, r.wp = 0, r.rv.n
	return nil
}

// readIdleNow is RawConn.Read's callback for awaitIdle: a buffer is held
// only while a read finds data. The first read uses the buffer the Reader
// just emptied, if it still holds one, so that a stream busy enough to
// have its next FPDU waiting takes nothing from the pool; a read that
// finds nothing gives the buffer back before the wait.
func (r *Reader) readIdleNow(fd uintptr) bool {
	bp := r.bufp
	if bp == nil {
		bp = r.pool.Get().(*[]byte)
	}
	r.buf, r.bufp, r.rp, r.wp = nil, nil, 0, 0
	b := *bp
	for {
		// The raw system call, compared as an Errno: unix.Read's error
		// interface costs an interface comparison per case, twice a round
		// trip.
		n, _, e := unix.Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			r.rv.n = int(n)
			if n > 0 {
				r.buf, r.bufp = b, bp
				return true
			}
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			r.pool.Put(bp)
			return false
		default:
			r.rv.err = e
		}
		r.pool.Put(bp)
		return true
	}
}
