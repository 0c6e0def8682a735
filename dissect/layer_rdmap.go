package dissect

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// RDMAP is the header of an RDMAP message segment (RFC 5040 §4).
//
// RDMAP's control field and a Send with Invalidate's STag travel in the
// octets the DDP header reserves for its upper layer, so an RDMAP layer is
// decoded from its DDP segment as a whole: it must be bound to the DDP
// layer decoded just before it (NewRDMAP). gopacket.NewPacket does that
// itself; with a gopacket.DecodingLayerParser pass a bound pair:
//
//	var d dissect.DDP
//	r := dissect.NewRDMAP(&d)
//	parser := gopacket.NewDecodingLayerParser(dissect.LayerTypeMPA, &mpaLayer, &d, r)
type RDMAP struct {
	// Contents is what RDMAP adds after the DDP header: the 28-octet
	// Read Request header, an RFC 7306 or Flush extension header, or a
	// Terminate's control field and attached headers (the whole rest of
	// its segment); empty for the other opcodes. Payload is the message
	// data the segment carries. Every extension rdmap knows is decoded
	// (rdmap.AllExtensions).
	layers.BaseLayer
	Op      rdmap.Opcode
	Version uint8
	// InvalidateSTag is the STag a Send with Invalidate names, else 0.
	InvalidateSTag uint32
	// ReadRequest holds the Read Request header when Op is
	// OpReadRequest.
	ReadRequest rdmap.ReadRequestFields
	// Terminate is the decoded Terminate, with both readings of its
	// control field, when Op is OpTerminate; its slices alias the data.
	Terminate *rdmap.ReceivedTerminate
	// AtomicRequest holds an RFC 7306 Atomic Request header;
	// AtomicResponseID and AtomicOrig an Atomic Response's; Immediate the
	// data of an Immediate Data message.
	AtomicRequest    rdmap.AtomicRequestFields
	AtomicResponseID uint32
	AtomicOrig       uint64
	Immediate        uint64

	ddp *DDP
}

// NewRDMAP returns an RDMAP layer that decodes the segment d decoded.
func NewRDMAP(d *DDP) *RDMAP { return &RDMAP{ddp: d} }

// LayerType returns LayerTypeRDMAP.
func (r *RDMAP) LayerType() gopacket.LayerType { return LayerTypeRDMAP }

// CanDecode returns LayerTypeRDMAP.
func (r *RDMAP) CanDecode() gopacket.LayerClass { return LayerTypeRDMAP }

// NextLayerType returns LayerTypePayload when the segment carries data.
func (r *RDMAP) NextLayerType() gopacket.LayerType {
	if len(r.Payload) > 0 {
		return gopacket.LayerTypePayload
	}
	return gopacket.LayerTypeZero
}

// DecodeFromBytes decodes the RDMAP header of the segment its DDP layer
// holds; data must be that layer's payload. Header errors (an undefined
// opcode, a T flag that does not match it, a malformed Read Request) are
// rdmap's typed errors with the Terminate code a receiver sends.
func (r *RDMAP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	d := r.ddp
	*r = RDMAP{ddp: d}
	if d == nil || d.segment == nil {
		return ErrNoDDP
	}
	seg := d.segment
	dl := len(d.Contents)
	if len(data) != len(seg)-dl || (len(data) > 0 && &data[0] != &seg[dl]) {
		return fmt.Errorf("%w: the data is not the payload of the bound DDP layer", ErrNoDDP)
	}
	h, err := rdmap.ParseWith(seg, len(seg), rdmap.AllExtensions)
	if err != nil {
		return err
	}
	r.Op, r.Version = h.Op, rdmap.ControlVersion(d.RsvdULP)
	r.InvalidateSTag = h.InvalidateSTag()
	// The header's views know which opcode carries which header: nothing
	// here lists opcodes but the Terminate, whose segment is all header.
	if rr := h.ReadRequest(); rr != nil {
		r.ReadRequest = rr.Fields()
	}
	if ar := h.AtomicRequest(); ar != nil {
		r.AtomicRequest = ar.Fields()
	}
	if resp := h.AtomicResponse(); resp != nil {
		r.AtomicResponseID, r.AtomicOrig = resp.ID(), resp.Orig()
	}
	r.Immediate, _ = h.Immediate()
	if h.Op == rdmap.OpTerminate {
		rt, err := rdmap.ParseTerminate(seg)
		if err != nil {
			return err
		}
		r.Terminate = &rt
		r.Contents = data
		return nil
	}
	r.Contents, r.Payload = data[:h.Len-dl], data[h.Len-dl:]
	return nil
}

// SerializeTo prepends the octets RDMAP adds after the DDP header: the
// Read Request header, an RFC 7306 header, or a Terminate re-encoded
// exactly as received.
// The opcode itself is the DDP layer's RsvdULP.
func (r *RDMAP) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	var h []byte
	switch r.Op {
	case rdmap.OpReadRequest:
		h = rdmap.AppendReadRequestBody(nil, r.ReadRequest)
	case rdmap.OpAtomicRequest:
		h = rdmap.AppendAtomicRequest(nil, 0, r.AtomicRequest)[ddp.UntaggedHeaderLen:]
	case rdmap.OpAtomicResponse:
		h = rdmap.AppendAtomicResponse(nil, 0, r.AtomicResponseID, r.AtomicOrig)[ddp.UntaggedHeaderLen:]
	case rdmap.OpImmediate, rdmap.OpImmediateSE:
		h = rdmap.AppendImmediate(nil, r.Op, 0, r.Immediate)[ddp.UntaggedHeaderLen:]
	case rdmap.OpExtension:
		h = r.Contents // the Flush extension's header, as received
	case rdmap.OpTerminate:
		if r.Terminate == nil {
			return errors.New("dissect: Terminate layer without a Terminate")
		}
		h = r.Terminate.Append(nil)[ddp.UntaggedHeaderLen:]
	default:
		return nil
	}
	out, err := b.PrependBytes(len(h))
	if err != nil {
		return err
	}
	copy(out, h)
	return nil
}

func decodeRDMAPAlone([]byte, gopacket.PacketBuilder) error { return ErrNoDDP }
