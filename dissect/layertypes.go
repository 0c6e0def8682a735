package dissect

import (
	"errors"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Layer types of the iWARP protocols. gopacket reserves 0–999 for itself
// and recommends 1000–1999 for application protocols (an array lookup
// rather than a map); these four numbers are registered by this package's
// init and nowhere else.
const (
	LayerTypeMPAFrame gopacket.LayerType = 1800 // MPA Request or Reply (RFC 5044 §7.1)
	LayerTypeMPA      gopacket.LayerType = 1801 // MPA FPDU (RFC 5044 §4)
	LayerTypeDDP      gopacket.LayerType = 1802 // DDP segment header (RFC 5041 §4)
	LayerTypeRDMAP    gopacket.LayerType = 1803 // RDMAP message header (RFC 5040 §4)
)

func init() {
	gopacket.RegisterLayerType(int(LayerTypeMPAFrame), gopacket.LayerTypeMetadata{Name: "MPAFrame", Decoder: gopacket.DecodeFunc(decodeMPAFrame)})
	gopacket.RegisterLayerType(int(LayerTypeMPA), gopacket.LayerTypeMetadata{Name: "MPA", Decoder: gopacket.DecodeFunc(decodeMPA)})
	gopacket.RegisterLayerType(int(LayerTypeDDP), gopacket.LayerTypeMetadata{Name: "DDP", Decoder: gopacket.DecodeFunc(decodeDDP)})
	gopacket.RegisterLayerType(int(LayerTypeRDMAP), gopacket.LayerTypeMetadata{Name: "RDMAP", Decoder: gopacket.DecodeFunc(decodeRDMAPAlone)})
}

// RegisterTCPPort makes gopacket decode the payload of TCP segments to or
// from port as MPA ("decode as": MPA has no assigned port), when packets
// are decoded with gopacket.DecodeOptions.DecodeStreamsAsDatagrams (without
// it gopacket leaves every TCP payload undecoded). Like
// layers.RegisterTCPPortLayerType, which it calls, it writes a global table
// without locking: call it from init or before any decoding starts.
//
// Per-packet decoding sees one segment at a time: it finds Request and
// Reply frames by their keys and FPDUs that start at a segment boundary,
// but cannot follow FPDUs across segments, remove markers, or know whether
// CRC was negotiated. Decode and DecodeFile follow whole streams.
func RegisterTCPPort(port uint16) {
	layers.RegisterTCPPortLayerType(layers.TCPPort(port), LayerTypeMPA)
}

// Errors of the per-packet layers. Protocol errors found in DDP and RDMAP
// headers are returned as the ddp and rdmap packages' typed errors, which
// carry the Terminate code a receiver would send.
var (
	ErrTruncated = errors.New("dissect: data ends inside the header or FPDU")
	ErrNotFrame  = errors.New("dissect: not an MPA Request or Reply (wrong key)")
	ErrIsFrame   = errors.New("dissect: an MPA Request or Reply, not an FPDU")
	ErrNoDDP     = errors.New("dissect: RDMAP is decoded after its DDP layer (see NewRDMAP)")
)
