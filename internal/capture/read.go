package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Link types that are not named in gopacket v1.1.19.
const (
	linkTypeLinuxSLL2 = 276
	linkTypeRawAlt12  = 12 // DLT_RAW on most systems
	linkTypeRawAlt14  = 14 // DLT_RAW on OpenBSD
)

// ErrUnsupportedLink is returned for a capture whose link-layer type the
// reader cannot strip to reach IP.
var ErrUnsupportedLink = errors.New("capture: unsupported link-layer type")

// ReadFile reads the pcap or pcapng file at path and returns its TCP
// connections in the order their first segment appears.
func ReadFile(path string) ([]*Conn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	conns, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return conns, nil
}

// packetSource hides the difference between the pcap and pcapng readers.
// Packet data is only valid until the next call; segments copy what they keep.
type packetSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// Read reads a pcap (optionally gzip-compressed) or pcapng capture and
// returns its TCP connections in the order their first segment appears.
// Frames that are not TCP over IPv4 or IPv6 are counted (frame numbers stay
// aligned with tshark's) and otherwise skipped.
//
// The whole capture (at most MaxFileSize bytes) is read into memory first,
// so that lengths inside the file are checked against the bytes present
// before anything is allocated from them.
//
// A file that ends inside its last record (a capture program stopped while
// writing) is read up to that record: Read returns the connections found
// before it together with a *CutError saying where the file stops.
func Read(r io.Reader) ([]*Conn, error) {
	data, err := slurp(r)
	if err != nil {
		return nil, err
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(data))
	}
	var (
		src      packetSource
		linkType func(ci gopacket.CaptureInfo) uint32
	)
	var end, want int // where the complete records end; the cut one's length
	if binary.BigEndian.Uint32(data) == ngSectionHeader {
		if end, want, err = checkPcapng(data); err != nil {
			return nil, err
		}
		// Mixed link types: every packet is returned, so frame numbers
		// count every record whatever its interface.
		ng, err := pcapgo.NewNgReader(bytes.NewReader(data[:end]), pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		src = ng
		linkType = func(ci gopacket.CaptureInfo) uint32 {
			if iface, err := ng.Interface(ci.InterfaceIndex); err == nil {
				return uint32(iface.LinkType)
			}
			return uint32(ng.LinkType())
		}
	} else {
		if !isPcap(data) {
			return nil, fmt.Errorf("%w: not a pcap or pcapng file", ErrMalformed)
		}
		end, want = pcapEnd(data)
		// gopacket keeps link types in a uint8; read the full 32-bit value
		// from the header so that types above 255 (Linux SLL2) survive.
		lt, ok := pcapHeaderLinkType(data)
		pr, err := pcapgo.NewReader(bytes.NewReader(data[:end]))
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		pr.SetSnaplen(pcapSnaplen(data))
		src = pr
		if !ok {
			lt = uint32(pr.LinkType())
		}
		linkType = func(gopacket.CaptureInfo) uint32 { return lt }
	}

	var a assembler
	frame := 1
	for ; ; frame++ {
		data, ci, err := src.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("capture: frame %d: %w", frame, err)
		}
		ip, err := stripLink(linkType(ci), data)
		if err != nil {
			return nil, fmt.Errorf("capture: frame %d: %w", frame, err)
		}
		if ip == nil {
			continue
		}
		if seg, ok := decodeTCP(ip, frame); ok {
			a.add(seg)
		}
	}
	if end < len(data) {
		return a.finish(), &CutError{Frame: frame, Offset: end, Have: len(data) - end, Want: want}
	}
	return a.finish(), nil
}

// pcapHeaderLinkType reads the link type of an uncompressed pcap header.
func pcapHeaderLinkType(h []byte) (uint32, bool) {
	if len(h) < 24 {
		return 0, false
	}
	switch binary.LittleEndian.Uint32(h) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		return binary.LittleEndian.Uint32(h[20:]), true
	case 0xd4c3b2a1, 0x4d3cb2a1:
		return binary.BigEndian.Uint32(h[20:]), true
	}
	return 0, false
}

// stripLink returns the IP packet inside a link-layer frame, or nil when the
// frame carries something else.
func stripLink(lt uint32, b []byte) ([]byte, error) {
	var etherType uint16
	switch lt {
	case uint32(layers.LinkTypeEthernet):
		if len(b) < 14 {
			return nil, nil
		}
		etherType, b = binary.BigEndian.Uint16(b[12:14]), b[14:]
		// 802.1Q and 802.1ad tags, possibly stacked.
		for (etherType == 0x8100 || etherType == 0x88a8) && len(b) >= 4 {
			etherType, b = binary.BigEndian.Uint16(b[2:4]), b[4:]
		}
	case uint32(layers.LinkTypeLinuxSLL):
		if len(b) < 16 {
			return nil, nil
		}
		etherType, b = binary.BigEndian.Uint16(b[14:16]), b[16:]
	case linkTypeLinuxSLL2:
		if len(b) < 20 {
			return nil, nil
		}
		etherType, b = binary.BigEndian.Uint16(b[0:2]), b[20:]
	case uint32(layers.LinkTypeNull), uint32(layers.LinkTypeLoop):
		if len(b) < 4 {
			return nil, nil
		}
		// The 4-byte family is in host order for Null and network order
		// for Loop; the IP version nibble decides, whatever the family says.
		b = b[4:]
		return ipOrNil(b), nil
	case uint32(layers.LinkTypeRaw), linkTypeRawAlt12, linkTypeRawAlt14:
		return ipOrNil(b), nil
	case uint32(layers.LinkTypeIPv4), uint32(layers.LinkTypeIPv6):
		return ipOrNil(b), nil
	default:
		return nil, fmt.Errorf("%w %d", ErrUnsupportedLink, lt)
	}
	switch etherType {
	case 0x0800, 0x86dd:
		// A frame cut short at its link header carries no IP packet.
		return ipOrNil(b), nil
	}
	return nil, nil
}

func ipOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	switch b[0] >> 4 {
	case 4, 6:
		return b
	}
	return nil
}

// segment is one TCP segment as the assembler needs it.
type segment struct {
	frame    int
	src, dst netip.AddrPort
	seq      uint32
	syn, ack bool
	fin, rst bool
	payload  []byte
}

func decodeTCP(ip []byte, frame int) (segment, bool) {
	if len(ip) == 0 {
		return segment{}, false
	}
	first := layers.LayerTypeIPv4
	if ip[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	pkt := gopacket.NewPacket(ip, first, gopacket.DecodeOptions{NoCopy: true, Lazy: true})
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil {
		return segment{}, false
	}
	var srcIP, dstIP netip.Addr
	switch n := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		if n.Flags&layers.IPv4MoreFragments != 0 || n.FragOffset != 0 {
			return segment{}, false
		}
		srcIP, _ = netip.AddrFromSlice(n.SrcIP.To4())
		dstIP, _ = netip.AddrFromSlice(n.DstIP.To4())
	case *layers.IPv6:
		srcIP, _ = netip.AddrFromSlice(n.SrcIP.To16())
		dstIP, _ = netip.AddrFromSlice(n.DstIP.To16())
	default:
		return segment{}, false
	}
	return segment{
		frame:   frame,
		src:     netip.AddrPortFrom(srcIP, uint16(tcp.SrcPort)),
		dst:     netip.AddrPortFrom(dstIP, uint16(tcp.DstPort)),
		seq:     tcp.Seq,
		syn:     tcp.SYN,
		ack:     tcp.ACK,
		fin:     tcp.FIN,
		rst:     tcp.RST,
		payload: bytes.Clone(tcp.Payload),
	}, true
}
