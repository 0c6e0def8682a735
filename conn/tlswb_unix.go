//go:build unix

package conn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const canTryWrite = true

// tryState is what one non-blocking write needs; the callback RawConn.Write
// runs is made once, so that a write does not allocate.
type tryState struct {
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

func (t *tryState) init() { t.fn = t.writeNow }

// write makes one non-blocking write of p to the socket; EAGAIN is no
// error, just nothing written.
func (t *tryState) write(rc syscall.RawConn, p []byte) (int, error) {
	t.p, t.n, t.err = p, 0, nil
	err := rc.Write(t.fn)
	t.p = nil // keep no reference to the caller's bytes
	if err == nil {
		err = t.err
	}
	return t.n, err
}

func (t *tryState) writeNow(fd uintptr) bool {
	for {
		n, err := unix.Write(int(fd), t.p)
		switch err {
		case nil:
			t.n = n
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			t.err = err
		}
		return true
	}
}
