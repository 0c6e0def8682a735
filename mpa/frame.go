package mpa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/termcode"
)

// Sizes and limits of MPA Request/Reply frames.
const (
	KeyLen         = 16
	FrameHeaderLen = 20 // key, flags, revision, PD_Length
	// MaxPrivateData is RFC 5044's limit on PD_Length (the IRD/ORD block
	// of an enhanced frame counts towards it).
	MaxPrivateData = 512
	// SiwMaxPDLength is the largest PD_Length siw accepts (it drops the
	// connection without a reply above it, in siw_recv_mpa_rr).
	SiwMaxPDLength = 256
	// SiwMaxPrivateData is the most application private data that is
	// safe towards and from siw: its 8-bit length arithmetic wraps for
	// 252–255 bytes (siw_send_mpareqrep takes an 8-bit length).
	SiwMaxPrivateData = 251
)

// The 16-byte keys that open a Request and a Reply (RFC 5044 §7.1); ASCII,
// no terminating NUL.
const (
	RequestKey = "MPA ID Req Frame"
	ReplyKey   = "MPA ID Rep Frame"
)

// Kind tells a Request from a Reply.
type Kind uint8

// Frame kinds; the zero Kind is not a frame.
const (
	KindRequest Kind = 1
	KindReply   Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "Request"
	case KindReply:
		return "Reply"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Flags is the flags byte of a Request or Reply, kept raw: reserved bits
// survive parsing and encoding unchanged.
type Flags uint8

// Flag bits (RFC 5044 §7.1; Enhanced from RFC 6581, value as used by siw,
// irdma and cxgb4).
const (
	FlagMarkers   Flags = 0x80 // M: the sender wants markers in the stream it receives
	FlagCRC       Flags = 0x40 // C: CRC32c in use
	FlagReject    Flags = 0x20 // R: the responder rejects the connection
	FlagEnhanced  Flags = 0x10 // RFC 6581 enhanced setup: the IRD/ORD block is present
	FlagsReserved Flags = 0x0f // must be zero when sent; siw's dormant GSO bit is 0x08
)

func (f Flags) String() string {
	s := ""
	add := func(c bool, n string) {
		if c {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	add(f&FlagMarkers != 0, "M")
	add(f&FlagCRC != 0, "C")
	add(f&FlagReject != 0, "R")
	add(f&FlagEnhanced != 0, "E")
	if r := f & FlagsReserved; r != 0 {
		add(true, fmt.Sprintf("res=0x%02x", uint8(r)))
	}
	if s == "" {
		return "-"
	}
	return s
}

// Header is a byte-slice view of the fixed 20-byte part of a frame.
type Header []byte

// Key returns the 16-byte key.
func (h Header) Key() []byte { return h[:KeyLen] }

// Kind returns KindRequest or KindReply for the two valid keys, else 0.
func (h Header) Kind() Kind {
	switch string(h[:KeyLen]) {
	case RequestKey:
		return KindRequest
	case ReplyKey:
		return KindReply
	}
	return 0
}

// Flags returns the flags byte.
func (h Header) Flags() Flags { return Flags(h[16]) }

// Rev returns the revision byte.
func (h Header) Rev() uint8 { return h[17] }

// PDLength returns PD_Length, the length of all private data including an
// IRD/ORD block.
func (h Header) PDLength() int { return int(binary.BigEndian.Uint16(h[18:20])) }

// Frame is a decoded MPA Request or Reply.
type Frame struct {
	Kind  Kind
	Flags Flags
	Rev   uint8
	// HasIRDORD reports that the private data opens with the RFC 6581
	// block, decoded into IRDORD. It is set for every revision-2 frame
	// with the Enhanced flag, except a reject too short to hold the block
	// (siw sends such rejects).
	HasIRDORD bool
	IRDORD    IRDORD
	// PrivateData is the application's private data, after the block.
	PrivateData []byte
}

// Enhanced reports whether the frame uses RFC 6581 enhanced setup:
// revision 2 with the Enhanced flag.
func (f *Frame) Enhanced() bool { return f.Rev == 2 && f.Flags&FlagEnhanced != 0 }

// PDLength returns the PD_Length the frame encodes to.
func (f *Frame) PDLength() int {
	if f.HasIRDORD {
		return IRDORDLen + len(f.PrivateData)
	}
	return len(f.PrivateData)
}

// Len returns the encoded size.
func (f *Frame) Len() int { return FrameHeaderLen + f.PDLength() }

func (f *Frame) String() string {
	s := fmt.Sprintf("%s rev %d flags %s PD_Length %d", f.Kind, f.Rev, f.Flags, f.PDLength())
	if f.HasIRDORD {
		v := f.IRDORD
		s += fmt.Sprintf(" IRD %d ORD %d", v.IRD, v.ORD)
		if v.P2P {
			s += " P2P"
		}
		if v.RTR != 0 {
			s += " RTR " + v.RTR.String()
		}
	}
	if len(f.PrivateData) > 0 {
		s += fmt.Sprintf(" private data %q", f.PrivateData)
	}
	return s
}

// checkHeader validates the fixed part: key, revision and PD_Length
// against RFC 5044's 512 and the caller's limit.
func checkHeader(h Header, maxPD int) *Error {
	if h.Kind() == 0 {
		return protoErr(termcode.MPAInvalidFrame, ErrBadKey, "key %q", h.Key())
	}
	// RFC 5044 defines revision 1, RFC 6581 revision 2. siw closes the
	// connection without a reply when Rev > 2 (siw_proc_mpareq; the rev-3
	// round of mpa-host-client.pcap shows it).
	if h.Rev() > 2 {
		return protoErr(termcode.MPAInvalidFrame, ErrRevision, "revision %d", h.Rev())
	}
	if n := h.PDLength(); n > MaxPrivateData || n > maxPD {
		return protoErr(termcode.MPAInvalidFrame, ErrPrivateDataLength, "PD_Length %d, limit %d", n, min(maxPD, MaxPrivateData))
	}
	return nil
}

// decodeBody fills a Frame from a checked header and exactly PD_Length
// bytes of private data. PrivateData aliases pd.
func decodeBody(h Header, pd []byte) (Frame, *Error) {
	f := Frame{Kind: h.Kind(), Flags: h.Flags(), Rev: h.Rev()}
	if f.Enhanced() {
		switch {
		case len(pd) >= IRDORDLen:
			f.HasIRDORD = true
			f.IRDORD = IRDORDBlock(pd).Decode()
			pd = pd[IRDORDLen:]
		case f.Flags&FlagReject == 0:
			// Improperly formatted (RFC 6581 §6): the Private Data of an
			// enhanced frame MUST begin with the block. A responder
			// closes without a Reply (RFC 5044 §7.1.2 rule 2).
			return Frame{}, protoErr(termcode.MPAInvalidFrame, ErrShortEnhanced, "PD_Length %d", len(pd))
		}
	}
	f.PrivateData = pd
	return f, nil
}

// ParseFrame decodes the Request or Reply at the start of b and returns it
// with the number of bytes it occupies. PrivateData aliases b. Bytes after
// the frame are not examined.
func ParseFrame(b []byte) (Frame, int, error) {
	if len(b) < FrameHeaderLen {
		return Frame{}, 0, protoErr(termcode.MPAInvalidFrame, ErrTruncated, "%d of %d header bytes", len(b), FrameHeaderLen)
	}
	h := Header(b[:FrameHeaderLen])
	if err := checkHeader(h, MaxPrivateData); err != nil {
		return Frame{}, 0, err
	}
	n := FrameHeaderLen + h.PDLength()
	if len(b) < n {
		return Frame{}, 0, protoErr(termcode.MPAInvalidFrame, ErrTruncated, "%d of %d bytes", len(b), n)
	}
	f, err := decodeBody(h, b[FrameHeaderLen:n])
	if err != nil {
		return Frame{}, 0, err
	}
	return f, n, nil
}

// ReadFrame reads one Request or Reply from r, reading exactly the frame's
// bytes and nothing after it, so a following FPDU stream stays in r.
// PD_Length above maxPD (or above 512) is refused before any private data is
// read; the private data buffer is allocated at its exact, bounded size.
//
// A connection that ends inside the frame yields an *Error with code 0x01
// wrapping ErrConnectionLost; other read errors are returned wrapped as
// they are (deadlines, for example).
func ReadFrame(r io.Reader, maxPD int) (Frame, error) {
	hdr := make(Header, FrameHeaderLen)
	if err := readFull(r, hdr); err != nil {
		return Frame{}, err
	}
	if err := checkHeader(hdr, maxPD); err != nil {
		return Frame{}, err
	}
	var pd []byte
	if n := hdr.PDLength(); n > 0 {
		pd = make([]byte, n)
		if err := readFull(r, pd); err != nil {
			return Frame{}, err
		}
	}
	f, perr := decodeBody(hdr, pd)
	if perr != nil {
		return Frame{}, perr
	}
	return f, nil
}

func readFull(r io.Reader, b []byte) error {
	n, err := io.ReadFull(r, b)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return protoErr(termcode.MPAConnectionLost, ErrConnectionLost, "got %d of %d bytes", n, len(b))
	}
	return fmt.Errorf("mpa: reading frame: %w", err)
}

// AppendFrame appends the encoding of f to b. It refuses frames this
// package never sends: an unknown kind, PD_Length over 512, an IRD/ORD block
// on a frame that is not enhanced, and an enhanced frame without the block
// unless it is a reject (a siw initiator reads the block of any enhanced
// Reply without checking its length, in siw_proc_mpareply).
func AppendFrame(b []byte, f *Frame) ([]byte, error) {
	var key string
	switch f.Kind {
	case KindRequest:
		key = RequestKey
	case KindReply:
		key = ReplyKey
	default:
		return b, fmt.Errorf("%w: frame kind %d", ErrConfig, f.Kind)
	}
	if f.HasIRDORD && !f.Enhanced() {
		return b, fmt.Errorf("%w: IRD/ORD block on a frame without rev 2 and the Enhanced flag", ErrConfig)
	}
	if f.Enhanced() && !f.HasIRDORD && f.Flags&FlagReject == 0 {
		return b, fmt.Errorf("%w: enhanced frame without the IRD/ORD block", ErrConfig)
	}
	n := f.PDLength()
	if n > MaxPrivateData {
		return b, fmt.Errorf("%w: PD_Length %d over %d", ErrPrivateDataLength, n, MaxPrivateData)
	}
	b = append(b, key...)
	b = append(b, byte(f.Flags), f.Rev)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	if f.HasIRDORD {
		b = AppendIRDORD(b, f.IRDORD)
	}
	return append(b, f.PrivateData...), nil
}
