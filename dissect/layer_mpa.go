package dissect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// MPAFrame is an MPA Request or Reply (RFC 5044 §7.1; the Enhanced flag and
// IRD/ORD block come from RFC 6581). It is decoded leniently: a frame that
// package mpa refuses (revision 3, an enhanced frame without its IRD/ORD
// block, PD_Length over 512) still decodes, with Frame nil and Err saying
// why a receiver would refuse it.
type MPAFrame struct {
	// Contents is the frame; Payload is whatever follows it in the same
	// data (FPDUs, when a peer sends them right behind the frame).
	layers.BaseLayer
	Kind  mpa.Kind
	Flags mpa.Flags
	Rev   uint8
	// PrivateData is all PD_Length octets, an RFC 6581 IRD/ORD block
	// included.
	PrivateData []byte
	// Frame is the frame as package mpa decodes it (the IRD/ORD block
	// split off), or nil if mpa refuses it; then Err is mpa's *mpa.Error.
	Frame *mpa.Frame
	Err   error
}

// LayerType returns LayerTypeMPAFrame.
func (f *MPAFrame) LayerType() gopacket.LayerType { return LayerTypeMPAFrame }

// CanDecode returns LayerTypeMPAFrame.
func (f *MPAFrame) CanDecode() gopacket.LayerClass { return LayerTypeMPAFrame }

// NextLayerType is LayerTypeMPA when bytes follow the frame.
func (f *MPAFrame) NextLayerType() gopacket.LayerType {
	if len(f.Payload) > 0 {
		return LayerTypeMPA
	}
	return gopacket.LayerTypeZero
}

// DecodeFromBytes decodes the frame at the start of data. Its slices alias
// data.
func (f *MPAFrame) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*f = MPAFrame{}
	if len(data) >= mpa.KeyLen && mpa.Header(data).Kind() == 0 {
		return ErrNotFrame
	}
	if len(data) < mpa.FrameHeaderLen {
		df.SetTruncated()
		return fmt.Errorf("%w: %d of %d frame header octets", ErrTruncated, len(data), mpa.FrameHeaderLen)
	}
	h := mpa.Header(data[:mpa.FrameHeaderLen])
	n := mpa.FrameHeaderLen + h.PDLength()
	if len(data) < n {
		df.SetTruncated()
		return fmt.Errorf("%w: %d of %d frame octets", ErrTruncated, len(data), n)
	}
	f.Kind, f.Flags, f.Rev = h.Kind(), h.Flags(), h.Rev()
	f.PrivateData = data[mpa.FrameHeaderLen:n]
	if fr, _, err := mpa.ParseFrame(data[:n]); err != nil {
		f.Err = err
	} else {
		f.Frame = &fr
	}
	f.Contents, f.Payload = data[:n], data[n:]
	return nil
}

// SerializeTo prepends the frame: key, flags, revision, PD_Length and the
// private data, as they are. It does not go through mpa.AppendFrame, which
// refuses frames this module never sends but a decoder must reproduce.
func (f *MPAFrame) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	var key string
	switch f.Kind {
	case mpa.KindRequest:
		key = mpa.RequestKey
	case mpa.KindReply:
		key = mpa.ReplyKey
	default:
		return fmt.Errorf("dissect: MPA frame of kind %d", f.Kind)
	}
	if len(f.PrivateData) > 0xffff {
		return fmt.Errorf("dissect: %d octets of private data do not fit PD_Length", len(f.PrivateData))
	}
	out, err := b.PrependBytes(mpa.FrameHeaderLen + len(f.PrivateData))
	if err != nil {
		return err
	}
	copy(out, key)
	out[16], out[17] = byte(f.Flags), f.Rev
	binary.BigEndian.PutUint16(out[18:20], uint16(len(f.PrivateData)))
	copy(out[mpa.FrameHeaderLen:], f.PrivateData)
	return nil
}

func decodeMPAFrame(data []byte, p gopacket.PacketBuilder) error {
	f := &MPAFrame{}
	if err := f.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(f)
	return p.NextDecoder(f.NextLayerType())
}

// MPA is one FPDU (RFC 5044 §4): the 2-octet ULPDU_Length, the ULPDU, pad to
// a multiple of four and the 4-octet CRC field.
//
// A single packet does not say whether CRC was negotiated, so the CRC field
// is reported with CRCValid rather than checked; where CRC is off siw sends
// zero there. Markers (RFC 5044 §4.3) cannot be removed without the stream's
// start and are not supported per packet.
type MPA struct {
	// Contents is the ULPDU_Length field; Payload is the ULPDU.
	layers.BaseLayer
	ULPDULength uint16
	// Pad is the pad as carried: siw does not always zero it, and it
	// counts for the CRC.
	Pad []byte
	// CRC is the CRC field in wire order.
	CRC [4]byte
	// CRCValid reports that CRC holds the CRC32c of the FPDU.
	CRCValid bool
	// Rest holds the bytes after this FPDU in the same data: further
	// FPDUs, or the start of one that continues in the next segment.
	Rest []byte
}

// LayerType returns LayerTypeMPA.
func (m *MPA) LayerType() gopacket.LayerType { return LayerTypeMPA }

// CanDecode returns LayerTypeMPA.
func (m *MPA) CanDecode() gopacket.LayerClass { return LayerTypeMPA }

// NextLayerType returns LayerTypeDDP: every ULPDU is a DDP segment.
func (m *MPA) NextLayerType() gopacket.LayerType { return LayerTypeDDP }

// DecodeFromBytes decodes the FPDU at the start of data with mpa.Reader,
// the framer the live stack uses. Its slices alias data.
func (m *MPA) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*m = MPA{}
	if isFrameKey(data) {
		return ErrIsFrame
	}
	r := mpa.NewReader(bytes.NewReader(data), mpa.ReaderConfig{CRC: true, BufferSize: 1024})
	n, err := r.Next()
	if err != nil {
		df.SetTruncated()
		return fmt.Errorf("%w: %d octets, no ULPDU_Length", ErrTruncated, len(data))
	}
	total := mpa.FPDULen(n)
	if len(data) < total {
		df.SetTruncated()
		return fmt.Errorf("%w: FPDU of %d octets, %d present", ErrTruncated, total, len(data))
	}
	switch err := r.End(); {
	case err == nil:
		m.CRCValid = true
	case !errors.Is(err, mpa.ErrCRC):
		return err
	}
	m.ULPDULength = uint16(n)
	m.Contents, m.Payload = data[:2], data[2:2+n]
	m.Pad = data[2+n : total-4]
	copy(m.CRC[:], data[total-4:total])
	m.Rest = data[total:]
	return nil
}

// SerializeTo frames the bytes serialized so far (the ULPDU) as an FPDU.
// With FixLengths the length field is the ULPDU's length, otherwise
// ULPDULength. With ComputeChecksums the pad is zero and the CRC field is
// computed by mpa.Writer, the live stack's framer; otherwise Pad (when it
// has the right length) and CRC are written as they are.
func (m *MPA) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	ulpdu := b.Bytes()
	if len(ulpdu) > mpa.MaxULPDU {
		return fmt.Errorf("dissect: %d-octet ULPDU does not fit an FPDU", len(ulpdu))
	}
	total := mpa.FPDULen(len(ulpdu))
	trailer := make([]byte, total-2-len(ulpdu))
	length := m.ULPDULength
	if opts.FixLengths {
		length = uint16(len(ulpdu))
	}
	if opts.ComputeChecksums {
		if length != uint16(len(ulpdu)) {
			return fmt.Errorf("dissect: ULPDULength %d for a %d-octet ULPDU; use FixLengths", length, len(ulpdu))
		}
		var fpdu bytes.Buffer
		w := mpa.NewWriter(&fpdu, mpa.WriterConfig{CRC: true})
		if err := w.WriteFPDU(nil, ulpdu); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		copy(trailer, fpdu.Bytes()[2+len(ulpdu):])
	} else {
		if len(m.Pad) == len(trailer)-4 {
			copy(trailer, m.Pad)
		}
		copy(trailer[len(trailer)-4:], m.CRC[:])
	}
	hdr, err := b.PrependBytes(2)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint16(hdr, length)
	tail, err := b.AppendBytes(len(trailer))
	if err != nil {
		return err
	}
	copy(tail, trailer)
	return nil
}

// decodeMPA is the decoder behind LayerTypeMPA, what RegisterTCPPort
// installs: a segment that opens with a Request or Reply key holds a
// frame, anything else an FPDU.
func decodeMPA(data []byte, p gopacket.PacketBuilder) error {
	if isFrameKey(data) {
		return decodeMPAFrame(data, p)
	}
	m := &MPA{}
	if err := m.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(m)
	return p.NextDecoder(m.NextLayerType())
}

func isFrameKey(b []byte) bool {
	return len(b) >= mpa.KeyLen && mpa.Header(b).Kind() != 0
}
