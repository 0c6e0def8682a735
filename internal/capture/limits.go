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

// checkPcapng walks the blocks of a pcapng file and refuses any whose
// lengths do not fit the file, so that no length from the file can make
// the reader allocate more than the file holds. Interface snapshot lengths
// above 16 MiB are rewritten to 0 ("no limit"), which makes the reader
// size buffers by each packet's own, checked, length.
func checkPcapng(data []byte) error {
	var order binary.ByteOrder = binary.LittleEndian
	var snap0 uint32 // snapshot length of the section's first interface
	ifaces := 0
	for off := 0; off < len(data); {
		if len(data)-off < ngMinBlockLen {
			return fmt.Errorf("%w: truncated pcapng block at %d", ErrMalformed, off)
		}
		b := data[off:]
		if binary.LittleEndian.Uint32(b) == ngSectionHeader {
			switch {
			case binary.LittleEndian.Uint32(b[8:]) == ngByteOrderMagic:
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(b[8:]) == ngByteOrderMagic:
				order = binary.BigEndian
			default:
				return fmt.Errorf("%w: pcapng section without byte-order magic at %d", ErrMalformed, off)
			}
			ifaces, snap0 = 0, 0
		}
		typ, n := order.Uint32(b), int(order.Uint32(b[4:]))
		if n < ngMinBlockLen || n%4 != 0 || n > len(b) || int(order.Uint32(b[n-4:])) != n {
			return fmt.Errorf("%w: pcapng block of length %d at %d", ErrMalformed, n, off)
		}
		switch typ {
		case ngInterface:
			if n < 20 {
				return fmt.Errorf("%w: short interface block at %d", ErrMalformed, off)
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
				return fmt.Errorf("%w: packet block at %d claims more data than it holds", ErrMalformed, off)
			}
		case ngSimplePacket:
			// The reader takes the original length, cut to the first
			// interface's snapshot length, as the captured length.
			capLen := order.Uint32(b[8:])
			if snap0 != 0 && capLen > snap0 {
				capLen = snap0
			}
			if n < 16 || int(capLen) > n-16 {
				return fmt.Errorf("%w: simple packet block at %d claims more data than it holds", ErrMalformed, off)
			}
		}
		off += n
	}
	return nil
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
