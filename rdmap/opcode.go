package rdmap

// Opcode is the RDMA message opcode, the low four bits of the RDMAP control
// field (RFC 5040 §4.1; IANA RDDP "RDMAP Message Operation Codes").
type Opcode uint8

// RFC 5040 opcodes. The extension opcodes (OpExtension, and RFC 7306's
// when they are added) are in the same table, marked with the extension a
// receiver must have negotiated before it accepts them.
const (
	OpWrite            Opcode = 0x0
	OpReadRequest      Opcode = 0x1
	OpReadResponse     Opcode = 0x2
	OpSend             Opcode = 0x3
	OpSendInvalidate   Opcode = 0x4
	OpSendSE           Opcode = 0x5
	OpSendSEInvalidate Opcode = 0x6
	OpTerminate        Opcode = 0x7
)

// Untagged queue numbers (IANA "RDMAP DDP Untagged Queue
// Numbers"). RFC 7306 adds QN 3 for Atomic Responses.
const (
	QNSend        uint32 = 0
	QNReadRequest uint32 = 1
	QNTerminate   uint32 = 2
	// NumQueues is the number of untagged queues the base protocol uses.
	NumQueues = 3
)

// Header lengths per message, counted from the DDP control field (the MPA
// ULPDU Length is not included).
const (
	WriteHeaderLen        = 14      // DDP tagged header
	ReadResponseHeaderLen = 14      // DDP tagged header
	SendHeaderLen         = 18      // DDP untagged header
	ReadRequestBodyLen    = 28      // sink STag, TO, size, source STag, TO
	ReadRequestHeaderLen  = 18 + 28 // the whole Read Request ULPDU
	TerminateHeaderLen    = 18 + 4  // up to and including the control word
	// MaxTerminateLen is a Terminate carrying every optional field: the DDP
	// Segment Length, an untagged DDP header and a Read Request header.
	MaxTerminateLen = TerminateHeaderLen + 2 + 18 + ReadRequestBodyLen
	// MaxHeaderLen is the longest fixed header of any opcode (RFC 7306's
	// Atomic Request); peek this many bytes (or the whole ULPDU if
	// shorter) before calling Parse.
	MaxHeaderLen = AtomicRequestHeaderLen
)

// Version is the RDMAP version this package speaks (RFC 5040 §4.1: RV is
// 01b).
const Version = 1

type opInfo struct {
	name    string
	label   string // short and stable: metrics labels
	defined bool
	// ext is the extension that must be negotiated for the opcode to be
	// accepted (0: RFC 5040, always).
	ext    Extensions
	tagged bool
	qn     uint32
	hdrLen int
	send   bool // a Send variant
	inv    bool // carries an Invalidate STag
	se     bool // solicited event
	imm    bool // an Immediate Data variant (RFC 7306 §4.1)
}

// opTable is indexed by the 4-bit opcode so that extensions slot in.
var opTable = [16]opInfo{
	OpWrite:            {name: "RDMA Write", label: "write", defined: true, tagged: true, hdrLen: WriteHeaderLen},
	OpReadRequest:      {name: "RDMA Read Request", label: "read_request", defined: true, qn: QNReadRequest, hdrLen: ReadRequestHeaderLen},
	OpReadResponse:     {name: "RDMA Read Response", label: "read_response", defined: true, tagged: true, hdrLen: ReadResponseHeaderLen},
	OpSend:             {name: "Send", label: "send", defined: true, qn: QNSend, hdrLen: SendHeaderLen, send: true},
	OpSendInvalidate:   {name: "Send with Invalidate", label: "send_invalidate", defined: true, qn: QNSend, hdrLen: SendHeaderLen, send: true, inv: true},
	OpSendSE:           {name: "Send with Solicited Event", label: "send_se", defined: true, qn: QNSend, hdrLen: SendHeaderLen, send: true, se: true},
	OpSendSEInvalidate: {name: "Send with Solicited Event and Invalidate", label: "send_se_invalidate", defined: true, qn: QNSend, hdrLen: SendHeaderLen, send: true, inv: true, se: true},
	OpTerminate:        {name: "Terminate", label: "terminate", defined: true, qn: QNTerminate, hdrLen: TerminateHeaderLen},
	OpImmediate:        {name: "Immediate Data", label: "immediate", defined: true, ext: ExtRFC7306, qn: QNSend, hdrLen: ImmediateHeaderLen, imm: true},
	OpImmediateSE:      {name: "Immediate Data with Solicited Event", label: "immediate_se", defined: true, ext: ExtRFC7306, qn: QNSend, hdrLen: ImmediateHeaderLen, se: true, imm: true},
	OpAtomicRequest:    {name: "Atomic Request", label: "atomic_request", defined: true, ext: ExtRFC7306, qn: QNReadRequest, hdrLen: AtomicRequestHeaderLen},
	OpAtomicResponse:   {name: "Atomic Response", label: "atomic_response", defined: true, ext: ExtRFC7306, qn: QNAtomicResponse, hdrLen: AtomicResponseHeaderLen},
	// The header length of OpExtension depends on its type; this is the
	// longest (a Flush Request), what a receiver peeks.
	OpExtension: {name: "iwarp-go extension", label: "extension", defined: true, ext: ExtFlush, qn: QNReadRequest, hdrLen: FlushRequestHeaderLen},
}

func (op Opcode) info() *opInfo { return &opTable[op&0x0f] }

// String returns the IANA name, or "opcode 0xN" for an undefined one.
func (op Opcode) String() string {
	if op < 16 && op.info().defined {
		return op.info().name
	}
	return "opcode 0x" + hex2(uint8(op))
}

// Defined reports whether this package implements op, as part of RFC
// 5040 or of an extension (see Extension).
func (op Opcode) Defined() bool { return op < 16 && op.info().defined }

// Extension returns the extension a connection must have negotiated for op
// to be accepted, or 0 for an RFC 5040 opcode (and an undefined one).
func (op Opcode) Extension() Extensions {
	if !op.Defined() {
		return 0
	}
	return op.info().ext
}

// Label returns a short, stable name of op ("write", "read_request", …,
// "0x8" for an undefined opcode): the one spelling metrics labels derive
// from. (A work completion's opcode names the work request, not a
// message: conn.WCOpcode has its own names.)
func (op Opcode) Label() string {
	if op.Defined() {
		return op.info().label
	}
	return "0x" + hex2(uint8(op&0x0f))
}

// Tagged reports whether op travels in tagged DDP segments.
func (op Opcode) Tagged() bool { return op.Defined() && op.info().tagged }

// QN returns the untagged queue number of op (0 for tagged opcodes).
func (op Opcode) QN() uint32 { return op.info().qn }

// HeaderLen returns the fixed header length of op counted from the DDP
// control field, or 0 if op is undefined.
func (op Opcode) HeaderLen() int {
	if !op.Defined() {
		return 0
	}
	return op.info().hdrLen
}

// IsSend reports whether op is one of the four Send variants.
func (op Opcode) IsSend() bool { return op.Defined() && op.info().send }

// Invalidates reports whether op carries an Invalidate STag.
func (op Opcode) Invalidates() bool { return op.Defined() && op.info().inv }

// Solicited reports whether op asks for a solicited event.
func (op Opcode) Solicited() bool { return op.Defined() && op.info().se }

// immediate reports whether op is one of the two Immediate Data variants.
func (op Opcode) immediate() bool { return op.Defined() && op.info().imm }

// MakeControl returns the RDMAP control field for op: RV 1 in the top two
// bits, the reserved bits zero, the opcode in the low four bits.
func MakeControl(op Opcode) byte { return Version<<6 | byte(op&0x0f) }

// ControlVersion returns the RV field of an RDMAP control field.
func ControlVersion(c byte) uint8 { return c >> 6 }

// ControlOpcode returns the opcode of an RDMAP control field.
func ControlOpcode(c byte) Opcode { return Opcode(c & 0x0f) }

func hex2(v uint8) string {
	const digits = "0123456789abcdef"
	if v < 16 {
		return string(digits[v])
	}
	return string([]byte{digits[v>>4], digits[v&0x0f]})
}

func hex2pad(v uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4], digits[v&0x0f]})
}
