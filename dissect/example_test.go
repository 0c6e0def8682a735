package dissect_test

import (
	"fmt"
	"log"

	"github.com/google/gopacket"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// Decode a capture of Linux siw running rping and look at the first
// messages of the connection.
func ExampleDecodeFile() {
	d, err := dissect.DecodeFile("../internal/capture/testdata/rping-lo.pcap")
	if err != nil {
		log.Fatal(err)
	}
	s := d.Streams[0]
	fmt.Println(s.Client, "→", s.Server, s.State)
	fmt.Printf("request: rev %d, IRD %d ORD %d\n", s.Request.Rev, s.Request.IRDORD.IRD, s.Request.IRDORD.ORD)
	for _, p := range s.PDUs[:4] {
		fmt.Println(p.LastFrame(), p.Dir, p.Op, p.ULPDULength, p.CRC)
	}
	// Output:
	// 10.0.2.15:48856 → 10.0.2.15:7174 established
	// request: rev 2, IRD 1 ORD 1
	// 8 up Send 34 absent
	// 9 down RDMA Read Request 46 absent
	// 10 up RDMA Read Response 78 absent
	// 11 down Send 34 absent
}

// Decode one FPDU with gopacket. The CRC field is checked (CRCValid), but
// whether CRC was negotiated is something only the MPA exchange tells.
func ExampleMPA() {
	ulpdu := append(rdmap.AppendSend(nil, rdmap.OpSend, true, 0, 1, 0), "ping"...)
	fpdu := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(fpdu, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&dissect.MPA{}, gopacket.Payload(ulpdu))

	pkt := gopacket.NewPacket(fpdu.Bytes(), dissect.LayerTypeMPA, gopacket.Default)
	m := pkt.Layer(dissect.LayerTypeMPA).(*dissect.MPA)
	d := pkt.Layer(dissect.LayerTypeDDP).(*dissect.DDP)
	r := pkt.Layer(dissect.LayerTypeRDMAP).(*dissect.RDMAP)
	fmt.Println("ULPDU", m.ULPDULength, "CRC valid", m.CRCValid)
	fmt.Println("QN", d.QN, "MSN", d.MSN, "last", d.Last())
	fmt.Printf("%v %q\n", r.Op, r.Payload)
	// Output:
	// ULPDU 22 CRC valid true
	// QN 0 MSN 1 last true
	// Send "ping"
}

// Decode an MPA Request with its RFC 6581 IRD/ORD block.
func ExampleMPAFrame() {
	req, _ := mpa.AppendFrame(nil, &mpa.Frame{Kind: mpa.KindRequest, Rev: 2, Flags: mpa.FlagEnhanced | mpa.FlagCRC,
		HasIRDORD: true, IRDORD: mpa.IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: mpa.RTRWrite}})
	var f dissect.MPAFrame
	if err := f.DecodeFromBytes(req, gopacket.NilDecodeFeedback); err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Kind, f.Flags, f.Frame.IRDORD.IRD, f.Frame.IRDORD.P2P, f.Frame.IRDORD.RTR)
	// Output:
	// Request C|E 16 true Write
}

// What siw compares when an FPDU's CRC field (no pad) reaches it three
// octets in one socket buffer and the fourth in the next: the fourth
// overwrites the first, and the last octet is the previous FPDU's.
func ExampleSiwTrailer() {
	var t dissect.SiwTrailer
	t.Read([]byte{0x11, 0x22, 0x33, 0x44}, 0) // the previous FPDU's field, whole
	t.Read([]byte{0x88, 0xd7, 0x1f, 0xf2}, 3)
	fmt.Printf("% x\n", t.CRC())
	// Output:
	// f2 d7 1f 44
}
