package dissect

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/iwarp-go/iwarp-go/ddp"
)

// DDP is the header of a DDP segment (RFC 5041 §4): the tagged header
// (STag, TO) or the untagged one (QN, MSN, MO). The octets DDP reserves for
// its upper layer carry RDMAP's control field and, for a Send with
// Invalidate, the STag to invalidate (RFC 5040 §4.1); they are kept here
// as RsvdULP and RsvdULPWord and interpreted by the RDMAP layer.
type DDP struct {
	// Contents is the 14- or 18-octet header; Payload is the rest of
	// the segment.
	layers.BaseLayer
	Control ddp.Control
	RsvdULP byte // the RDMAP control field

	// Tagged buffer model.
	STag uint32
	TO   uint64

	// Untagged buffer model.
	RsvdULPWord uint32
	QN, MSN, MO uint32

	segment []byte // the whole segment, for the RDMAP layer
}

// LayerType returns LayerTypeDDP.
func (d *DDP) LayerType() gopacket.LayerType { return LayerTypeDDP }

// CanDecode returns LayerTypeDDP.
func (d *DDP) CanDecode() gopacket.LayerClass { return LayerTypeDDP }

// NextLayerType returns LayerTypeRDMAP, the only upper layer iWARP
// defines for DDP; a wrong RDMAP version is reported by that layer.
func (d *DDP) NextLayerType() gopacket.LayerType { return LayerTypeRDMAP }

// Tagged reports the T flag.
func (d *DDP) Tagged() bool { return d.Control.Tagged() }

// Last reports the L flag.
func (d *DDP) Last() bool { return d.Control.Last() }

// DecodeFromBytes decodes the header of the DDP segment data, which must be
// the whole ULPDU: DDP has no length field of its own. A wrong DDP version
// or a segment too short for its header is a *ddp.Error carrying the
// Terminate code a receiver sends.
func (d *DDP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*d = DDP{}
	c, err := ddp.CheckHeader(data, len(data))
	if err != nil {
		return err
	}
	d.Control = c
	n := ddp.HeaderLen(c)
	if c.Tagged() {
		h, _ := ddp.ParseTagged(data)
		d.RsvdULP, d.STag, d.TO = h.RsvdULP(), h.STag(), h.TO()
	} else {
		h, _ := ddp.ParseUntagged(data)
		d.RsvdULP, d.RsvdULPWord = h.RsvdULP(), h.RsvdULPWord()
		d.QN, d.MSN, d.MO = h.QN(), h.MSN(), h.MO()
	}
	d.Contents, d.Payload = data[:n], data[n:]
	d.segment = data
	return nil
}

// SerializeTo prepends the header, encoded by the ddp package.
func (d *DDP) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	var hdr [ddp.MaxHeaderLen]byte
	var h []byte
	if d.Control.Tagged() {
		h = ddp.AppendTagged(hdr[:0], d.Control, d.RsvdULP, d.STag, d.TO)
	} else {
		h = ddp.AppendUntagged(hdr[:0], d.Control, d.RsvdULP, d.RsvdULPWord, d.QN, d.MSN, d.MO)
	}
	out, err := b.PrependBytes(len(h))
	if err != nil {
		return err
	}
	copy(out, h)
	return nil
}

func decodeDDP(data []byte, p gopacket.PacketBuilder) error {
	d := &DDP{}
	if err := d.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(d)
	// The RDMAP layer is decoded here, bound to this DDP layer, rather than
	// through p.NextDecoder, which skips an empty payload: a zero-length
	// Write or Send still has an RDMAP header (in the DDP header).
	r := NewRDMAP(d)
	if err := r.DecodeFromBytes(d.Payload, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(r.NextLayerType())
}
