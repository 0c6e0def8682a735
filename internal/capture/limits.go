package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFileSize bounds how much of a capture Read takes in (after
// decompression). It is the only size limit on capture input in the
// module: dissect.MaxCaptureSize is this constant.
const MaxFileSize = 256 << 20

// ErrMalformed reports a capture whose framing is inconsistent.
var ErrMalformed = errors.New("capture: malformed file")

// slurp reads the whole capture into memory, decompressing gzip, so that
// every length in it can be checked against the bytes really present:
// gopacket's readers size buffers from lengths in the file.
func slurp(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, MaxFileSize+1)); err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxFileSize)
	}
	return data, nil
}

// pcapng block types checked below.
const (
	ngSectionHeader   = 0x0a0d0d0a
	ngInterface       = 0x00000001
	ngObsoletePacket  = 0x00000002
	ngSimplePacket    = 0x00000003
	ngEnhancedPacket  = 0x00000006
	ngByteOrderMagic  = 0x1a2b3c4d
	maxInterfaceSnap  = 1 << 24
	ngMinBlockLen     = 12
	ngPacketHeaderLen = 32 // EPB and obsolete PB: 28 bytes before the data, 4 after
)

// maxCutRecord is the longest record a capture cut short may have been
// writing: a longer length in the last record is damage, not a cut.
const maxCutRecord = maxInterfaceSnap + 64

// checkPcapng walks the blocks of a pcapng file and refuses any whose
// lengths do not fit the file, so that no length from the file can make
// the reader allocate more than the file holds. Interface snapshot lengths
// above 16 MiB are rewritten to 0 ("no limit"), which makes the reader
// size buffers by each packet's own, checked, length. It returns where
// the complete blocks end: before the last block if the file ends inside
// it (a capture program stopped while writing), and how long that block
// would have been (0 if its header is cut too).
func checkPcapng(data []byte) (end, want int, err error) {
	var order binary.ByteOrder = binary.LittleEndian
	var snap0 uint32 // snapshot length of the section's first interface
	ifaces := 0
	for off := 0; off < len(data); {
		if len(data)-off < ngMinBlockLen {
			if off > 0 {
				return off, 0, nil
			}
			return 0, 0, fmt.Errorf("%w: truncated pcapng block at %d", ErrMalformed, off)
		}
		b := data[off:]
		if binary.LittleEndian.Uint32(b) == ngSectionHeader {
			switch {
			case binary.LittleEndian.Uint32(b[8:]) == ngByteOrderMagic:
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(b[8:]) == ngByteOrderMagic:
				order = binary.BigEndian
			default:
				return 0, 0, fmt.Errorf("%w: pcapng section without byte-order magic at %d", ErrMalformed, off)
			}
			ifaces, snap0 = 0, 0
		}
		typ, n := order.Uint32(b), int(order.Uint32(b[4:]))
		if off > 0 && n >= ngMinBlockLen && n%4 == 0 && n > len(b) && n <= maxCutRecord && !ngPacketOverflows(order, typ, b, n) {
			return off, n, nil
		}
		if n < ngMinBlockLen || n%4 != 0 || n > len(b) || int(order.Uint32(b[n-4:])) != n {
			return 0, 0, fmt.Errorf("%w: pcapng block of length %d at %d", ErrMalformed, n, off)
		}
		switch typ {
		case ngInterface:
			if n < 20 {
				return 0, 0, fmt.Errorf("%w: short interface block at %d", ErrMalformed, off)
			}
			snap := order.Uint32(b[12:])
			if snap > maxInterfaceSnap {
				order.PutUint32(b[12:], 0)
				snap = 0
			}
			if ifaces == 0 {
				snap0 = snap
			}
			ifaces++
		case ngEnhancedPacket, ngObsoletePacket:
			if n < ngPacketHeaderLen || int(order.Uint32(b[20:])) > n-ngPacketHeaderLen {
				return 0, 0, fmt.Errorf("%w: packet block at %d claims more data than it holds", ErrMalformed, off)
			}
		case ngSimplePacket:
			// The reader takes the original length, cut to the first
			// interface's snapshot length, as the captured length.
			capLen := order.Uint32(b[8:])
			if snap0 != 0 && capLen > snap0 {
				capLen = snap0
			}
			if n < 16 || int(capLen) > n-16 {
				return 0, 0, fmt.Errorf("%w: simple packet block at %d claims more data than it holds", ErrMalformed, off)
			}
		}
		off += n
	}
	return len(data), 0, nil
}

// isPcap reports whether data starts with a pcap file header's magic
// (microsecond or nanosecond timestamps, either byte order).
func isPcap(data []byte) bool {
	if len(data) < 4 {
		return false
	}
	switch binary.LittleEndian.Uint32(data) {
	case 0xa1b2c3d4, 0xa1b23c4d, 0xd4c3b2a1, 0x4d3cb2a1:
		return true
	}
	return false
}

// ngPacketOverflows reports whether b, the start of a packet block of
// length n, claims more captured data than the block holds: a block cut
// short may miss octets, but what it has must be consistent.
func ngPacketOverflows(order binary.ByteOrder, typ uint32, b []byte, n int) bool {
	return (typ == ngEnhancedPacket || typ == ngObsoletePacket) && len(b) >= 24 && int(order.Uint32(b[20:])) > n-ngPacketHeaderLen
}

// pcapEnd returns where the complete records of a pcap file end: before
// the last record if the file ends inside it, and how long that record
// would have been (0 if its 16-octet header is cut too). A last record
// longer than a cut could leave is left for the reader to refuse.
func pcapEnd(data []byte) (end, want int) {
	if len(data) < 24 {
		return len(data), 0
	}
	var order binary.ByteOrder = binary.LittleEndian
	if m := binary.LittleEndian.Uint32(data); m == 0xd4c3b2a1 || m == 0x4d3cb2a1 {
		order = binary.BigEndian
	}
	for off := 24; off < len(data); {
		if len(data)-off < 16 {
			return off, 0
		}
		n := 16 + int(order.Uint32(data[off+8:]))
		if n > len(data)-off {
			if n <= maxCutRecord {
				return off, n
			}
			break
		}
		off += n
	}
	return len(data), 0
}

// ErrCut matches (errors.Is) a *CutError.
var ErrCut = errors.New("capture: the file ends inside a record")

// CutError reports a capture file that ends inside a record, as a capture
// program stopped while writing leaves it. Read returns it together with
// the connections of every record before the cut.
type CutError struct {
	// Frame is the number the cut record would have had; Offset is where
	// it starts in the (decompressed) file.
	Frame  int
	Offset int
	// Have is how many of its octets the file holds, Want how many it
	// needs (0 when even its header is cut short).
	Have, Want int
}

func (e *CutError) Error() string {
	if e.Want == 0 {
		return fmt.Sprintf("capture: the file ends inside the header of frame %d's record, at offset %d (%d octets of it)", e.Frame, e.Offset, e.Have)
	}
	return fmt.Sprintf("capture: the file ends inside frame %d's record, at offset %d (%d of %d octets)", e.Frame, e.Offset, e.Have, e.Want)
}

func (e *CutError) Is(target error) bool { return target == ErrCut }

// pcapSnaplen returns the snapshot length to give gopacket's pcap reader:
// the header's, but never more than the file holds, so buffers sized by it
// stay bounded by the input.
func pcapSnaplen(data []byte) uint32 {
	if len(data) < 24 {
		return 0
	}
	var s uint32
	switch binary.LittleEndian.Uint32(data) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		s = binary.LittleEndian.Uint32(data[16:])
	default:
		s = binary.BigEndian.Uint32(data[16:])
	}
	if s == 0 || int64(s) > int64(len(data)) {
		s = uint32(len(data))
	}
	return s
}
