package dissect

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/iwarp-go/iwarp-go/internal/capture"
)

// Limits on what Decode reads. Every allocation while decoding is bounded
// by them or by the capture's actual size, never by a length field.
const (
	// MaxCaptureSize is the largest capture Decode reads (after gzip
	// decompression).
	MaxCaptureSize = 256 << 20
	// MaxSnaplen bounds the per-packet buffer: a capture header that
	// announces a larger (or unlimited) snapshot length is read as if it
	// announced this one, and a packet longer than it is an error.
	MaxSnaplen = 1 << 20
)

// ErrCapture wraps every failure to read a capture file.
var ErrCapture = errors.New("dissect: unreadable capture")

// DecodeFile reads a pcap or pcapng capture (optionally gzip-compressed)
// and dissects every TCP connection in it.
func DecodeFile(path string) (*Dissection, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	defer f.Close()
	return Decode(f)
}

// Decode reads a pcap or pcapng capture (optionally gzip-compressed) and
// dissects every TCP connection in it: each direction is reassembled by
// sequence number and its bytes fed to an mpa.Reader configured from the
// MPA Request and Reply the capture holds. A file that ends inside a record
// (a capture program stopped while writing) is dissected up to that
// record, and Dissection.Cut says where it stops.
func Decode(r io.Reader) (*Dissection, error) {
	data, err := readLimited(r)
	if err != nil {
		return nil, err
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCapture, err)
		}
		if data, err = readLimited(zr); err != nil {
			return nil, err
		}
	}
	if err := sanitize(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	conns, err := capture.Read(bytes.NewReader(data))
	var cut *capture.CutError
	if err != nil && !errors.As(err, &cut) {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	d := &Dissection{Streams: make([]*Stream, 0, len(conns))}
	if cut != nil {
		d.Cut = &Cut{Frame: cut.Frame, Offset: cut.Offset, Have: cut.Have, Want: cut.Want}
	}
	for i, c := range conns {
		d.Streams = append(d.Streams, fromCapture(i, c))
	}
	return d, nil
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxCaptureSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	if len(data) > MaxCaptureSize {
		return nil, fmt.Errorf("%w: larger than %d octets", ErrCapture, MaxCaptureSize)
	}
	return data, nil
}

// sanitize bounds, in place, the lengths a capture's headers announce
// before gopacket's readers size buffers from them: pcapgo allocates the
// announced snapshot length for its packet buffer, and a pcapng packet's
// announced captured length, without checking either against the file.
func sanitize(b []byte) error {
	if len(b) < 4 {
		return errors.New("too short for a capture file header")
	}
	switch magic := binary.LittleEndian.Uint32(b); magic {
	case 0xa1b2c3d4, 0xa1b23c4d:
		return clampPcap(b, binary.LittleEndian)
	case 0xd4c3b2a1, 0x4d3cb2a1:
		return clampPcap(b, binary.BigEndian)
	case 0x0a0d0d0a:
		return clampPcapng(b)
	}
	return errors.New("not a pcap or pcapng file")
}

func clampPcap(b []byte, order binary.ByteOrder) error {
	if len(b) < 24 {
		return errors.New("truncated pcap file header")
	}
	if s := order.Uint32(b[16:20]); s == 0 || s > MaxSnaplen {
		order.PutUint32(b[16:20], MaxSnaplen)
	}
	return nil
}

// pcapng block types whose lengths gopacket trusts.
const (
	ngSectionHeader         = 0x0a0d0d0a
	ngInterface             = 0x00000001
	ngObsoletePacket        = 0x00000002
	ngSimplePacket          = 0x00000003
	ngEnhancedPacket        = 0x00000006
	ngByteOrderMagic uint32 = 0x1a2b3c4d
)

func clampPcapng(b []byte) error {
	var order binary.ByteOrder = binary.LittleEndian
	for off := 0; len(b)-off >= 12; {
		typ := order.Uint32(b[off:])
		if binary.LittleEndian.Uint32(b[off:]) == ngSectionHeader {
			typ = ngSectionHeader
			switch ngByteOrderMagic {
			case binary.LittleEndian.Uint32(b[off+8:]):
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(b[off+8:]):
				order = binary.BigEndian
			default:
				return fmt.Errorf("pcapng: bad byte-order magic at offset %d", off)
			}
		}
		n := order.Uint32(b[off+4:])
		if off > 0 && n >= 12 && n%4 == 0 && uint64(n) > uint64(len(b)-off) && n <= MaxSnaplen+64 &&
			!((typ == ngEnhancedPacket || typ == ngObsoletePacket) && len(b)-off >= 24 && uint64(order.Uint32(b[off+20:])) > uint64(n-32)) {
			return nil // the file ends inside this block: the reader says so
		}
		if n < 12 || n%4 != 0 || uint64(n) > uint64(len(b)-off) {
			return fmt.Errorf("pcapng: block at offset %d has length %d (%d octets left)", off, n, len(b)-off)
		}
		blk := b[off : off+int(n)]
		switch typ {
		case ngSectionHeader:
			if n < 28 {
				return fmt.Errorf("pcapng: short section header at offset %d", off)
			}
		case ngInterface:
			if n < 20 {
				return fmt.Errorf("pcapng: short interface block at offset %d", off)
			}
			// SnapLen 0 means unlimited: bound it too.
			if s := order.Uint32(blk[12:]); s == 0 || s > MaxSnaplen {
				order.PutUint32(blk[12:], MaxSnaplen)
			}
		case ngEnhancedPacket, ngObsoletePacket:
			if n < 32 || uint64(order.Uint32(blk[20:])) > uint64(n-32) {
				return fmt.Errorf("pcapng: packet block at offset %d claims more data than it holds", off)
			}
		case ngSimplePacket:
			if n < 16 {
				return fmt.Errorf("pcapng: short simple packet block at offset %d", off)
			}
		}
		off += int(n)
	}
	return nil
}
