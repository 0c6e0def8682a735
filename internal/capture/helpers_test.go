package capture

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"
)

// rawSeg describes a hand-made TCP segment for reader tests; it is built
// with gopacket's own serializer so the reader is not checked against the
// writer alone.
type rawSeg struct {
	src, dst netip.AddrPort
	seq, ack uint32
	syn, fin bool
	rst      bool
	payload  []byte
}

type linkKind int

const (
	linkEthernet linkKind = iota
	linkEthernetVLAN
	linkSLL
	linkSLL2
	linkRaw
	linkNull
	linkIPv4Only
)

func (k linkKind) linkType() layers.LinkType {
	switch k {
	case linkSLL:
		return layers.LinkTypeLinuxSLL
	case linkRaw:
		return layers.LinkTypeRaw
	case linkNull:
		return layers.LinkTypeNull
	case linkIPv4Only:
		return layers.LinkTypeIPv4
	}
	return layers.LinkTypeEthernet
}

func serializeSeg(t testing.TB, k linkKind, s rawSeg) []byte {
	t.Helper()
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(s.src.Port()),
		DstPort: layers.TCPPort(s.dst.Port()),
		Seq:     s.seq,
		Ack:     s.ack,
		SYN:     s.syn,
		FIN:     s.fin,
		RST:     s.rst,
		ACK:     !s.syn || s.ack != 0,
		PSH:     len(s.payload) > 0,
		Window:  65535,
	}
	var ipLayer gopacket.SerializableLayer
	etherType := layers.EthernetTypeIPv4
	family := layers.ProtocolFamilyIPv4
	if s.src.Addr().Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
			SrcIP: net.IP(s.src.Addr().AsSlice()), DstIP: net.IP(s.dst.Addr().AsSlice())}
		require.NoError(t, tcp.SetNetworkLayerForChecksum(ip))
		ipLayer = ip
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: net.IP(s.src.Addr().AsSlice()), DstIP: net.IP(s.dst.Addr().AsSlice())}
		require.NoError(t, tcp.SetNetworkLayerForChecksum(ip))
		ipLayer = ip
		etherType = layers.EthernetTypeIPv6
		family = layers.ProtocolFamilyIPv6Linux
	}
	var ls []gopacket.SerializableLayer
	switch k {
	case linkEthernet:
		ls = append(ls, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
			DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: etherType})
	case linkEthernetVLAN:
		ls = append(ls, &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
			DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 42, Type: etherType})
	case linkSLL:
		// gopacket cannot serialize Linux SLL; build its 16 bytes by hand.
		hdr := make([]byte, 16)
		hdr[1] = 4 // sent by us
		hdr[3] = 1 // ARPHRD_ETHER
		hdr[5] = 6
		copy(hdr[6:12], []byte{2, 0, 0, 0, 0, 1})
		hdr[14], hdr[15] = byte(uint16(etherType)>>8), byte(etherType)
		ls = append(ls, gopacket.Payload(hdr))
	case linkSLL2:
		hdr := make([]byte, 20)
		hdr[0], hdr[1] = byte(uint16(etherType)>>8), byte(etherType)
		hdr[11] = 1 // ARPHRD_ETHER
		hdr[13] = 6
		ls = append(ls, gopacket.Payload(hdr))
	case linkNull:
		ls = append(ls, &layers.Loopback{Family: family})
	}
	ls = append(ls, ipLayer, tcp, gopacket.Payload(s.payload))
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return bytes.Clone(buf.Bytes())
}

// writeRaw writes segs as a pcap of link kind k.
func writeRaw(t testing.TB, k linkKind, segs []rawSeg) []byte {
	t.Helper()
	var out bytes.Buffer
	w := pcapgo.NewWriter(&out)
	require.NoError(t, w.WriteFileHeader(65536, k.linkType()))
	ts := time.Unix(1_600_000_000, 0)
	for i, s := range segs {
		data := serializeSeg(t, k, s)
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(data), Length: len(data)}
		require.NoError(t, w.WritePacket(ci, data))
	}
	file := out.Bytes()
	if k == linkSLL2 {
		// gopacket's LinkType is 8 bits wide; patch in LINKTYPE_LINUX_SLL2.
		file[20], file[21], file[22], file[23] = 276&0xff, 276>>8, 0, 0
	}
	return file
}

// writeRawNg writes segs as a pcapng file of link kind k.
func writeRawNg(t testing.TB, k linkKind, segs []rawSeg) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := pcapgo.NewNgWriter(&out, k.linkType())
	require.NoError(t, err)
	ts := time.Unix(1_600_000_000, 0)
	for i, s := range segs {
		data := serializeSeg(t, k, s)
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(data), Length: len(data)}
		require.NoError(t, w.WritePacket(ci, data))
	}
	require.NoError(t, w.Flush())
	return out.Bytes()
}

var (
	cli4 = netip.MustParseAddrPort("10.0.0.1:40000")
	srv4 = netip.MustParseAddrPort("10.0.0.2:7174")
	cli6 = netip.MustParseAddrPort("[fd00::1]:40000")
	srv6 = netip.MustParseAddrPort("[fd00::2]:7174")
)

// handshake returns SYN, SYN-ACK, ACK for the given ISNs.
func handshake(c, s netip.AddrPort, cisn, sisn uint32) []rawSeg {
	return []rawSeg{
		{src: c, dst: s, seq: cisn, syn: true},
		{src: s, dst: c, seq: sisn, ack: cisn + 1, syn: true},
		{src: c, dst: s, seq: cisn + 1, ack: sisn + 1},
	}
}
