package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// MaxSegment is the largest payload one synthetic segment may carry: an
// IPv4 packet is at most 65535 bytes, less 20 for IP and 20 for TCP.
const MaxSegment = 65495

// Snaplen is the snapshot length written into capture headers; it holds the
// largest frame the writer produces.
const Snaplen = 262144

// Dir names a direction within a flow.
type Dir uint8

const (
	// Up is from the client (the side that sent the SYN) to the server.
	Up Dir = iota
	// Down is from the server to the client.
	Down
)

func (d Dir) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// Errors returned by the writer.
var (
	ErrSegmentSize = errors.New("capture: segment payload must be 1 to 65495 bytes")
	ErrFlowClosed  = errors.New("capture: flow already closed")
	ErrAddress     = errors.New("capture: client and server must be valid addresses of one IP family")
)

// WriterOptions configures a Writer.
type WriterOptions struct {
	// Clock supplies packet timestamps. Nil selects a deterministic clock
	// that starts at a fixed instant and advances 10µs per packet, so the
	// same conversation always produces the same file.
	Clock func() time.Time
}

// Writer writes Ethernet pcap captures of synthetic TCP conversations. It is
// safe for concurrent use; each packet is written whole.
type Writer struct {
	mu    sync.Mutex
	pw    *pcapgo.Writer
	clock func() time.Time
	now   time.Time
	frame []byte // reused for every packet
	flows int
}

// NewWriter writes a pcap file header (nanosecond timestamps, Ethernet link
// type) to w and returns a Writer for the packets.
func NewWriter(w io.Writer, opts *WriterOptions) (*Writer, error) {
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(Snaplen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("capture: writing file header: %w", err)
	}
	cw := &Writer{pw: pw, now: time.Unix(1_700_000_000, 0).UTC()}
	if opts != nil && opts.Clock != nil {
		cw.clock = opts.Clock
	}
	return cw, nil
}

// FlowConfig describes a synthetic TCP connection.
type FlowConfig struct {
	Client, Server netip.AddrPort
	// ClientISN and ServerISN are the initial sequence numbers; zero
	// selects fixed defaults that differ per flow.
	ClientISN, ServerISN uint32
	// MSS is announced in the SYN and SYN-ACK; zero announces MaxSegment.
	MSS uint16
}

// Flow is one synthetic TCP connection inside a Writer's capture.
type Flow struct {
	w      *Writer
	ends   [2]endpoint // indexed by Dir of the sender
	v6     bool
	closed bool
}

type endpoint struct {
	addr netip.AddrPort
	mac  [6]byte
	nxt  uint32 // next sequence number this side sends
	ipID uint16
}

// Open writes a three-way handshake for cfg and returns the flow.
func (w *Writer) Open(cfg FlowConfig) (*Flow, error) {
	c, s := cfg.Client.Addr(), cfg.Server.Addr()
	if !c.IsValid() || !s.IsValid() || c.Is4() != s.Is4() || c.Is4In6() || s.Is4In6() {
		return nil, ErrAddress
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flows++
	if cfg.ClientISN == 0 {
		cfg.ClientISN = 0x10000000*uint32(w.flows%15) + 1000
	}
	if cfg.ServerISN == 0 {
		cfg.ServerISN = 0xf0000000 - 0x01000000*uint32(w.flows%15)
	}
	if cfg.MSS == 0 {
		cfg.MSS = MaxSegment
	}
	f := &Flow{w: w, v6: c.Is6()}
	f.ends[Up] = endpoint{addr: cfg.Client, mac: macFor(c), nxt: cfg.ClientISN}
	f.ends[Down] = endpoint{addr: cfg.Server, mac: macFor(s), nxt: cfg.ServerISN}
	if err := f.emit(Up, flagSYN, 0, cfg.MSS, nil); err != nil {
		return nil, err
	}
	if err := f.emit(Down, flagSYN|flagACK, f.ends[Up].nxt, cfg.MSS, nil); err != nil {
		return nil, err
	}
	if err := f.emit(Up, flagACK, f.ends[Down].nxt, 0, nil); err != nil {
		return nil, err
	}
	return f, nil
}

// Segment writes one TCP segment carrying payload in direction d. The
// acknowledgement number covers everything the other side has sent.
func (f *Flow) Segment(d Dir, payload []byte) error {
	if len(payload) == 0 || len(payload) > MaxSegment {
		return fmt.Errorf("%w (got %d)", ErrSegmentSize, len(payload))
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.closed {
		return ErrFlowClosed
	}
	return f.emit(d, flagPSH|flagACK, f.ends[1-d].nxt, 0, payload)
}

// Close writes the FIN exchange that ends the flow: a FIN from the client,
// a FIN from the server, and the client's final ACK.
func (f *Flow) Close() error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.closed {
		return ErrFlowClosed
	}
	f.closed = true
	if err := f.emit(Up, flagFIN|flagACK, f.ends[Down].nxt, 0, nil); err != nil {
		return err
	}
	if err := f.emit(Down, flagFIN|flagACK, f.ends[Up].nxt, 0, nil); err != nil {
		return err
	}
	return f.emit(Up, flagACK, f.ends[Down].nxt, 0, nil)
}

const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagPSH = 0x08
	flagACK = 0x10
)

// emit builds and writes one frame; the caller holds f.w.mu.
func (f *Flow) emit(d Dir, flags uint8, ack uint32, mss uint16, payload []byte) error {
	src, dst := &f.ends[d], &f.ends[1-d]
	tcpLen := 20
	if mss != 0 {
		tcpLen = 24
	}
	ipLen := 20
	etherType := uint16(0x0800)
	if f.v6 {
		ipLen, etherType = 40, 0x86dd
	}
	// Frames shorter than Ethernet's 60-byte minimum are zero-padded, as
	// they would be on the wire.
	total := max(14+ipLen+tcpLen+len(payload), 60)
	w := f.w
	if cap(w.frame) < total {
		w.frame = make([]byte, total, max(total, 2048))
	}
	b := w.frame[:total]
	clear(b[:max(14+ipLen+tcpLen, 60)])

	copy(b[0:6], dst.mac[:])
	copy(b[6:12], src.mac[:])
	binary.BigEndian.PutUint16(b[12:14], etherType)

	ip := b[14 : 14+ipLen]
	sa, da := src.addr.Addr().AsSlice(), dst.addr.Addr().AsSlice()
	if f.v6 {
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:6], uint16(tcpLen+len(payload)))
		ip[6] = 6 // TCP
		ip[7] = 64
		copy(ip[8:24], sa)
		copy(ip[24:40], da)
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen+tcpLen+len(payload)))
		binary.BigEndian.PutUint16(ip[4:6], src.ipID)
		src.ipID++
		binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
		ip[8] = 64
		ip[9] = 6
		copy(ip[12:16], sa)
		copy(ip[16:20], da)
		binary.BigEndian.PutUint16(ip[10:12], ^checksumFold(sum16(ip, 0)))
	}

	tcp := b[14+ipLen : 14+ipLen+tcpLen+len(payload)]
	binary.BigEndian.PutUint16(tcp[0:2], src.addr.Port())
	binary.BigEndian.PutUint16(tcp[2:4], dst.addr.Port())
	binary.BigEndian.PutUint32(tcp[4:8], src.nxt)
	if flags&flagACK != 0 {
		binary.BigEndian.PutUint32(tcp[8:12], ack)
	}
	tcp[12] = uint8(tcpLen/4) << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:16], 65535)
	if mss != 0 {
		tcp[20], tcp[21] = 2, 4
		binary.BigEndian.PutUint16(tcp[22:24], mss)
	}
	copy(tcp[tcpLen:], payload)

	// Pseudo-header, then the segment.
	var s uint32
	s = sum16(sa, s)
	s = sum16(da, s)
	s += 6 + uint32(tcpLen+len(payload))
	s = sum16(tcp, s)
	binary.BigEndian.PutUint16(tcp[16:18], ^checksumFold(s))

	src.nxt += uint32(len(payload))
	if flags&(flagSYN|flagFIN) != 0 {
		src.nxt++
	}

	ts := w.now
	if w.clock != nil {
		ts = w.clock()
	} else {
		w.now = w.now.Add(10 * time.Microsecond)
	}
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: total, Length: total}
	if err := w.pw.WritePacket(ci, b); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}

// sum16 adds b to the running one's-complement sum s as big-endian 16-bit
// words, padding an odd final byte with zero.
func sum16(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func checksumFold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// macFor derives a locally administered unicast MAC from an address so that
// captures are deterministic.
func macFor(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x02, 0x00, b[12], b[13], b[14], b[15]}
}
