package dissect_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/gopacket"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// Whole-capture decoding: reassembly, framing, headers, frame attribution.
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"ib_write_bw", "mpa-host-client"} {
		b.Run(name, func(b *testing.B) {
			pcap, err := os.ReadFile(testutil.CapturePath(b, name+".pcap"))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(pcap)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := dissect.Decode(bytes.NewReader(pcap)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Per-packet decoding of one 4 KiB RDMA Write FPDU through a
// DecodingLayerParser.
func BenchmarkLayers(b *testing.B) {
	fpdu, _ := fpdus(b, mpa.WriterConfig{CRC: true}, write(true, 0x100, 0x1000, pattern(4096)))
	var m dissect.MPA
	var d dissect.DDP
	r := dissect.NewRDMAP(&d)
	var pl gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(dissect.LayerTypeMPA, &m, &d, r, &pl)
	var decoded []gopacket.LayerType
	b.SetBytes(int64(len(fpdu)))
	b.ReportAllocs()
	for b.Loop() {
		if err := parser.DecodeLayers(fpdu, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}
