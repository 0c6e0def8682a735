package pcaptap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/capture"
)

// MaxSegment is the largest TCP payload the capture puts in one frame (an
// IPv4 packet of 65,535 octets less the IP and TCP headers); a longer Read
// or Write is recorded as several segments.
const MaxSegment = 65495

// The capture writer refuses longer segments; this fails to compile if the
// two ever differ.
var _ [MaxSegment - capture.MaxSegment]struct{}
var _ [capture.MaxSegment - MaxSegment]struct{}

// ErrClosed is returned by Flush after Close.
var ErrClosed = errors.New("pcaptap: tap closed")

// Tap writes one pcap capture of every connection it wraps. It is safe for
// concurrent use. The zero value is not usable; call New.
type Tap struct {
	mu     sync.Mutex // serialises all capture output
	bw     *bufio.Writer
	cw     *capture.Writer
	closed bool
	err    error // first error writing the capture
	conns  int   // connections wrapped so far, for made-up addresses
}

// New writes the pcap file header to w and returns a Tap that appends the
// frames of every connection it wraps. Output is buffered: it reaches w when
// a tapped connection closes, on Flush and on Close. The Tap never closes w.
func New(w io.Writer) (*Tap, error) {
	if w == nil {
		return nil, errors.New("pcaptap: nil writer")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	cw, err := capture.NewWriter(bw, &capture.WriterOptions{Clock: time.Now})
	if err != nil {
		return nil, fmt.Errorf("pcaptap: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("pcaptap: writing the file header: %w", err)
	}
	return &Tap{bw: bw, cw: cw}, nil
}

// Wrap returns a connection that passes every call through to c and records
// the bytes of each Read and Write. It implements conn.Tap.
//
// The TCP handshake is recorded when the returned connection is first used:
// the side that writes first is taken to be the client that sent the SYN,
// as an MPA initiator does. Addresses and ports come from c.LocalAddr and
// c.RemoteAddr; a connection that is not TCP (net.Pipe, for example) gets
// made-up addresses in 192.0.2.0/24 (RFC 5737), consistent for its life.
//
// After Close the Tap records nothing more and Wrap returns c itself.
func (t *Tap) Wrap(c net.Conn) net.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return c
	}
	t.conns++
	local, lok := addrPort(c.LocalAddr())
	remote, rok := addrPort(c.RemoteAddr())
	if !lok || !rok || local.Addr().Is4() != remote.Addr().Is4() {
		k := uint16((t.conns - 1) % 16384)
		local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1}), 49152+k)
		remote = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 2}), 16384+k)
	}
	return &tapConn{Conn: c, t: t, local: local, remote: remote}
}

// Flush writes buffered frames to the underlying writer.
func (t *Tap) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	return t.flushLocked()
}

// Close flushes the capture and stops recording; connections still open
// keep working unrecorded. It returns the first error met while writing
// the capture, if any. Close is idempotent.
func (t *Tap) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return t.err
	}
	t.flushLocked()
	t.closed = true
	return t.err
}

// Err returns the first error met while writing the capture. Such an error
// never reaches the tapped connections: they keep working, unrecorded.
func (t *Tap) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tap) flushLocked() error {
	if t.err != nil {
		return t.err
	}
	if err := t.bw.Flush(); err != nil {
		t.err = fmt.Errorf("pcaptap: %w", err)
	}
	return t.err
}

// record runs f, which writes frames, unless the Tap is closed or broken.
// A flow that is already closed is not an error: a Read may return data
// after Close has recorded the FIN.
func (t *Tap) record(f func() error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.err != nil {
		return
	}
	if err := f(); err != nil && !errors.Is(err, capture.ErrFlowClosed) {
		t.err = fmt.Errorf("pcaptap: %w", err)
	}
}

// addrPort returns a TCP address as a plain IPv4 or IPv6 address and port.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok || ta == nil {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	ip := ap.Addr().Unmap().WithZone("")
	if !ip.IsValid() || ip.IsUnspecified() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip, ap.Port()), true
}
