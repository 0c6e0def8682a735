package conn

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// writeBehind sits between crypto/tls and the TCP connection, so that
// sealed records can be handed on without waiting for the socket: Write
// tries the socket once without blocking and keeps what it did not take in
// a backlog, which the transmit token holder drains (drainTo) where it may
// block, outside crypto/tls's write lock. A posting goroutine can then
// write into a TLS stream as it writes into a bare socket; and a peer's
// TLS 1.3 KeyUpdate, which makes the reading side write while it holds
// crypto/tls's write lock, can no longer wait on a peer that stops
// reading while a poster waits on that lock.
//
// The backlog is bounded by wbMax: the writers that fill it (tlsConn.Write
// with block set, and tlsConn.tryWriteBuffers) drain or refuse beforehand,
// so only writes of crypto/tls's own (KeyUpdate replies, alerts) can reach
// the bound, and one that would pass it fails the connection: a peer that
// asks for replies without reading them.
//
// Until enable, during the handshake, Write is the connection's blocking
// Write.
type writeBehind struct {
	net.Conn                 // the connection beneath (reads, deadlines, blocking writes)
	raw      syscall.RawConn // for the one non-blocking attempt; nil where there is none

	mu      sync.Mutex
	async   bool   // past the handshake
	buf     []byte // backlog: buf[head:] awaits the socket
	head    int
	busy    bool   // a drainTo is writing buf[head:] without mu
	err     error  // sticky: the socket failed
	backlog func() // tells the transmitter there is a backlog to drain

	try tryState // the non-blocking attempt's state, under mu
}

// wbMax bounds the backlog (bytes of sealed records).
const wbMax = 1 << 20

// wbChunk is the most plaintext a blocking tlsConn.Write hands crypto/tls
// at once, so that the backlog stays within wbMax.
const wbChunk = 64 << 10

var errWBFull = errors.New("iwarp: the peer stopped reading while TLS kept writing to it (TLS backlog full)")

func newWriteBehind(c net.Conn, tcp net.Conn) *writeBehind {
	wb := &writeBehind{Conn: c}
	if sc, ok := tcp.(syscall.Conn); ok && canTryWrite {
		if rc, err := sc.SyscallConn(); err == nil {
			wb.raw = rc
			wb.try.init()
		}
	}
	return wb
}

// enable starts write-behind once the handshake is done.
func (wb *writeBehind) enable() {
	wb.mu.Lock()
	wb.async = true
	wb.mu.Unlock()
}

// notify sets what a Write that leaves bytes behind calls: the engine's
// wake-up of its transmitter.
func (wb *writeBehind) notify(kick func()) {
	wb.mu.Lock()
	wb.backlog = kick
	wb.mu.Unlock()
}

// Write never waits for the socket once enabled: see writeBehind. It is
// called by crypto/tls under its write lock.
func (wb *writeBehind) Write(p []byte) (int, error) {
	wb.mu.Lock()
	if !wb.async {
		wb.mu.Unlock()
		return wb.Conn.Write(p)
	}
	defer wb.mu.Unlock()
	if wb.err != nil {
		return 0, wb.err
	}
	total := len(p)
	if !wb.busy && wb.head == len(wb.buf) && wb.raw != nil {
		n, err := wb.try.write(wb.raw, p)
		if err != nil {
			wb.err = err
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
		p = p[n:]
	}
	if len(wb.buf)-wb.head+len(p) > wbMax {
		wb.err = errWBFull
		return total - len(p), wb.err
	}
	if !wb.busy && wb.head > 0 && len(wb.buf)+len(p) > cap(wb.buf) {
		wb.buf = wb.buf[:copy(wb.buf, wb.buf[wb.head:])]
		wb.head = 0
	}
	wb.buf = append(wb.buf, p...)
	if wb.backlog != nil {
		wb.backlog()
	}
	return total, nil
}

// pending returns the bytes in the backlog.
func (wb *writeBehind) pending() int {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return len(wb.buf) - wb.head
}

// drainTo writes the backlog to the socket, blocking (under the socket's
// write deadline), until at most keep bytes remain. Only the transmit
// token holder calls it, never under crypto/tls's write lock.
func (wb *writeBehind) drainTo(keep int) error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for wb.err == nil && len(wb.buf)-wb.head > keep {
		p := wb.buf[wb.head:]
		wb.busy = true
		wb.mu.Unlock()
		// Writes meanwhile append behind p and never move it.
		n, err := wb.Conn.Write(p)
		wb.mu.Lock()
		wb.busy = false
		wb.head += n
		if err != nil {
			wb.err = err
		}
	}
	if wb.head == len(wb.buf) {
		wb.buf, wb.head = wb.buf[:0], 0
	}
	return wb.err
}
