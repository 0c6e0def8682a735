package dissect

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/iwarp-go/iwarp-go/rdmap"
)

// Dissection is what a capture holds, one entry per TCP connection.
type Dissection struct {
	Streams []*Stream `json:"streams"`
	// Cut, if not nil, says that the file ends inside a record: everything
	// before that record is dissected.
	Cut *Cut `json:"cut,omitempty"`
}

// Cut says where a capture file that ends inside a record stops.
type Cut struct {
	// Frame is the number the cut record would have had: frames before it
	// are dissected. Offset is where the record starts in the file
	// (decompressed).
	Frame  int `json:"frame"`
	Offset int `json:"offset"`
	// Have is how many octets of the record the file holds, Want how many
	// it needs (0 when its header is cut short too).
	Have int `json:"have"`
	Want int `json:"want,omitempty"`
}

func (c *Cut) String() string {
	where := fmt.Sprintf("%d octets of its header", c.Have)
	if c.Want > 0 {
		where = fmt.Sprintf("%d of its %d octets", c.Have, c.Want)
	}
	return fmt.Sprintf("the capture file is cut short: it ends inside the record of frame %d, at file offset %d (%s); frames 1 to %d are decoded",
		c.Frame, c.Offset, where, c.Frame-1)
}

// Dir is a direction within a TCP connection.
type Dir uint8

const (
	// Up is from the client (the side that sent the SYN, or when the
	// capture missed it, the sender of the first segment) to the server.
	Up Dir = iota
	// Down is from the server to the client.
	Down
)

func (d Dir) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// MarshalText encodes the direction as "up" or "down".
func (d Dir) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// State says how far MPA connection setup got in a stream.
type State uint8

const (
	// StateNoHandshake: neither direction opens with an MPA Request, so
	// nothing is decoded (a capture that starts after connection setup,
	// or traffic that is not iWARP).
	StateNoHandshake State = iota
	// StateRequestOnly: a Request but no Reply (the responder closed or
	// the capture ends).
	StateRequestOnly
	// StateRejected: the Reply has R set; no FPDUs follow.
	StateRejected
	// StateEstablished: Request and Reply; the FPDU streams are decoded.
	StateEstablished
)

var stateNames = [...]string{"no-handshake", "request-only", "rejected", "established"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText encodes the state by name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Stream is one TCP connection of a capture.
type Stream struct {
	// Index counts TCP connections from 0 in the order their first
	// segment appears, as tshark's tcp.stream does.
	Index      int            `json:"index"`
	Client     netip.AddrPort `json:"client"`
	Server     netip.AddrPort `json:"server"`
	FirstFrame int            `json:"first_frame,omitempty"`
	State      State          `json:"state"`
	// Initiator is the direction that carries the MPA Request.
	Initiator Dir `json:"initiator"`
	// Request and Reply are the MPA frames seen, if any.
	Request *Handshake `json:"request,omitempty"`
	Reply   *Handshake `json:"reply,omitempty"`
	// Directions describes each direction's byte stream, indexed by Dir.
	Directions [2]Direction `json:"directions"`
	// PDUs are the FPDUs of both directions in capture order: by the
	// frame that completes each, and in stream order within a frame.
	PDUs []*FPDU `json:"fpdus"`
	// Notes are findings that are not a PDU: a missing handshake, a
	// stream that ends inside an FPDU, a receive check that fails.
	Notes []Note `json:"notes,omitempty"`
}

// Direction is one direction of a stream.
type Direction struct {
	Src   netip.AddrPort `json:"src"`
	Dst   netip.AddrPort `json:"dst"`
	Bytes int            `json:"bytes"`
	// SYN, FIN and RST report the TCP flags seen.
	SYN bool `json:"syn"`
	FIN bool `json:"fin"`
	RST bool `json:"rst"`
	// Hole reports that the capture misses bytes: everything after the
	// first missing segment is left out.
	Hole bool `json:"hole,omitempty"`
	// CRC and Markers are the FPDU options negotiated for this
	// direction (established streams only).
	CRC     bool `json:"crc"`
	Markers bool `json:"markers"`
	// FPDUs counts the complete FPDUs decoded.
	FPDUs int `json:"fpdus"`
}

// Handshake is an MPA Request or Reply.
type Handshake struct {
	Dir    Dir    `json:"dir"`
	Frames []int  `json:"frames,omitempty"`
	Kind   string `json:"kind"` // "request" or "reply"
	Rev    uint8  `json:"rev"`
	// Flags is the raw flags octet; M, C, R and Enhanced its bits (RFC
	// 5044 §7.1; Enhanced from RFC 6581), Reserved the low four.
	Flags    Hex8  `json:"flags"`
	M        bool  `json:"m"`
	C        bool  `json:"c"`
	R        bool  `json:"r"`
	Enhanced bool  `json:"enhanced"`
	Reserved uint8 `json:"reserved,omitempty"`
	PDLength int   `json:"pd_length"`
	// PrivateData is all PD_Length octets, the IRD/ORD block included.
	PrivateData Bytes `json:"private_data"`
	// IRDORD is the RFC 6581 block when the frame has one; AppData the
	// application's private data after it.
	IRDORD  *IRDORD `json:"ird_ord,omitempty"`
	AppData Bytes   `json:"app_data"`
	// Error is why a receiver refuses the frame (package mpa's reason),
	// empty if it does not.
	Error string `json:"error,omitempty"`
}

// IRDORD is the RFC 6581 IRD/ORD block.
type IRDORD struct {
	IRD uint16 `json:"ird"`
	ORD uint16 `json:"ord"`
	P2P bool   `json:"p2p"`
	// RTR is the RTR types offered (Request) or chosen (Reply): "Write",
	// "Read", "Send", joined by "|"; "none" for none (mpa.RTR.String).
	RTR string `json:"rtr,omitempty"`
}

// CRCStatus is the result of checking an FPDU's CRC field.
type CRCStatus uint8

const (
	// CRCAbsent: CRC was not negotiated; the field is ignored (siw sends
	// zero).
	CRCAbsent CRCStatus = iota
	CRCGood
	CRCBad
	// CRCMissing: the capture ends before the CRC field.
	CRCMissing
)

var crcNames = [...]string{"absent", "good", "bad", "missing"}

func (c CRCStatus) String() string {
	if int(c) < len(crcNames) {
		return crcNames[c]
	}
	return "crc(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText encodes the status by name.
func (c CRCStatus) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// FPDU is one MPA FPDU and the DDP/RDMAP segment it carries.
type FPDU struct {
	Dir Dir `json:"dir"`
	// Frames are the capture frames that carried its octets, in stream
	// order; the last one completes it (tshark shows the PDU there).
	Frames []int `json:"frames"`
	// Offset is the stream offset of its first octet (a leading marker
	// included) and Len its length on the wire, markers included.
	Offset int `json:"offset"`
	Len    int `json:"len"`

	ULPDULength int `json:"ulpdu_length"`
	Pad         int `json:"pad"`
	Markers     int `json:"markers,omitempty"`
	// CRCField is the CRC field in wire order (tshark shows these four
	// octets as one big-endian number); CRCComputed is the CRC it should
	// hold, in the same order, when CRC is Bad.
	CRC         CRCStatus `json:"crc"`
	CRCField    Bytes     `json:"crc_field,omitempty"`
	CRCComputed Bytes     `json:"crc_computed,omitempty"`
	// TrailerSplit is, when the pad and CRC field arrived in two frames,
	// how many of its octets the first carried (siw misreads such a field:
	// SiwTrailer); 0 when it arrived whole, the frames are unknown or the
	// stream has markers.
	TrailerSplit int `json:"trailer_split,omitempty"`
	// Truncated reports an FPDU the capture ends inside of; the fields
	// below are those its captured octets hold.
	Truncated bool `json:"truncated,omitempty"`

	// DDP header (RFC 5041 §4).
	Tagged     bool    `json:"tagged"`
	Last       bool    `json:"last"`
	DDPVersion uint8   `json:"ddp_version"`
	STag       *Hex32  `json:"stag,omitempty"`
	TO         *Hex64  `json:"to,omitempty"`
	QN         *uint32 `json:"qn,omitempty"`
	MSN        *uint32 `json:"msn,omitempty"`
	MO         *uint32 `json:"mo,omitempty"`

	// RDMAP header (RFC 5040 §4).
	RDMAPVersion   uint8        `json:"rdmap_version"`
	Opcode         uint8        `json:"opcode"`
	Op             string       `json:"op"`
	InvalidateSTag *Hex32       `json:"invalidate_stag,omitempty"`
	ReadRequest    *ReadRequest `json:"read_request,omitempty"`
	Terminate      *Terminate   `json:"terminate,omitempty"`
	// RFC 7306 (every extension rdmap knows is decoded).
	AtomicRequest  *AtomicRequest  `json:"atomic_request,omitempty"`
	AtomicResponse *AtomicResponse `json:"atomic_response,omitempty"`
	Immediate      *Hex64          `json:"immediate,omitempty"`
	// PayloadLen is the message data this segment carries.
	PayloadLen int `json:"payload_len"`

	// Error is why a receiver rejects this header, with the Terminate
	// code it sends; empty if the header is well formed.
	Error string `json:"error,omitempty"`
}

// LastFrame returns the frame that completes the FPDU, 0 if unknown.
func (f *FPDU) LastFrame() int {
	if len(f.Frames) == 0 {
		return 0
	}
	return f.Frames[len(f.Frames)-1]
}

// ReadRequest is an RDMA Read Request header.
type ReadRequest struct {
	SinkSTag Hex32  `json:"sink_stag"`
	SinkTO   Hex64  `json:"sink_to"`
	Size     uint32 `json:"size"`
	SrcSTag  Hex32  `json:"src_stag"`
	SrcTO    Hex64  `json:"src_to"`
}

// AtomicRequest is an RFC 7306 Atomic Request header (§5.2.1).
type AtomicRequest struct {
	Op          string `json:"op"` // "FetchAdd", "CmpSwap"
	ID          uint32 `json:"id"`
	STag        Hex32  `json:"stag"`
	TO          Hex64  `json:"to"`
	AddSwap     Hex64  `json:"add_swap"`
	AddSwapMask Hex64  `json:"add_swap_mask"`
	Compare     Hex64  `json:"compare"`
	CompareMask Hex64  `json:"compare_mask"`
}

// AtomicResponse is an RFC 7306 Atomic Response header (§5.2.2).
type AtomicResponse struct {
	ID   uint32 `json:"id"`
	Orig Hex64  `json:"orig"`
}

// Terminate is a Terminate message, decoded by rdmap.ParseTerminate.
type Terminate struct {
	// Raw is the Terminate as carried after the DDP header: control
	// field, DDP Segment Length, attached headers and anything after.
	Raw Bytes `json:"raw"`
	// Control is the 4-octet Terminate Control field. RFC and SIW are its
	// two readings: RFC 5040's (layer in the high nibble, M/D/R at
	// 0x80/0x40/0x20) and x86 siw's (nibbles swapped, M/D/R at
	// 0x01/0x02/0x04); Layout names the one rdmap chose.
	Control Bytes   `json:"control"`
	RFC     Reading `json:"rfc"`
	SIW     Reading `json:"siw"`
	Layout  string  `json:"layout"`
	// SegmentLen is the DDP Segment Length field when present.
	SegmentLen *uint16 `json:"segment_len,omitempty"`
	DDPHeader  Bytes   `json:"ddp_header,omitempty"`
	RDMAHeader Bytes   `json:"rdma_header,omitempty"`
	Trailing   Bytes   `json:"trailing,omitempty"`
	// Conforming reports L set, QN 2, MSN 1 and MO 0.
	Conforming bool `json:"conforming"`
}

// Reading is a Terminate Control field read in one layout.
type Reading struct {
	Layer uint8  `json:"layer"`
	EType uint8  `json:"etype"`
	Code  uint8  `json:"code"`
	Name  string `json:"name"`
	M     bool   `json:"m"`
	D     bool   `json:"d"`
	R     bool   `json:"r"`
}

func reading(r rdmap.Reading) Reading {
	return Reading{Layer: uint8(r.Code.Layer()), EType: r.Code.EType(), Code: r.Code.ECode(), Name: r.Code.String(), M: r.M, D: r.D, R: r.R}
}

// Note is a finding about a stream that is not a PDU.
type Note struct {
	Dir Dir `json:"dir"`
	// Frame is the frame concerned, 0 if none; Offset the stream offset.
	Frame  int    `json:"frame,omitempty"`
	Offset int    `json:"offset"`
	Text   string `json:"text"`
}

// Bytes is a byte string that encodes as hex in JSON.
type Bytes []byte

// MarshalText encodes b as lower-case hex.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(b)), nil }

// Hex8 is an octet that encodes as "0x12" in JSON.
type Hex8 uint8

// MarshalText encodes h as "0x" and two hex digits.
func (h Hex8) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%02x", uint8(h)), nil }

// Hex32 is a 32-bit value (an STag) that encodes as "0x12345678" in JSON.
type Hex32 uint32

// MarshalText encodes h as "0x" and eight hex digits.
func (h Hex32) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%08x", uint32(h)), nil }

// Hex64 is a 64-bit value (a tagged offset) that encodes as a hex string
// in JSON, where a number would lose precision above 2^53.
type Hex64 uint64

// MarshalText encodes h as "0x" and sixteen hex digits.
func (h Hex64) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%016x", uint64(h)), nil }
