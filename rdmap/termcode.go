package rdmap

import (
	"errors"
	"strconv"

	"github.com/iwarp-go/iwarp-go/ddp"
)

// TermCode is a Terminate error: layer (4 bits), error type (4 bits) and
// error code (8 bits), encoded as layer<<12 | etype<<8 | code. This is the
// order of the first 16 bits of the Terminate Control field in the RFC
// 5040 layout, and the value every TerminateCode() method returns.
type TermCode uint16

// Layers.
const (
	LayerRDMAP = 0
	LayerDDP   = 1
	LayerLLP   = 2 // MPA
)

// Registered codes (IANA RDDP registry: "RDMAP Errors", "DDP Errors", "MPA
// Errors").
const (
	// RDMAP, layer 0. Local catastrophic is registered for ALL codes; we
	// send 0x00.
	CodeLocalCatastrophic  TermCode = 0x0000
	CodeInvalidSTag        TermCode = 0x0100
	CodeBaseBounds         TermCode = 0x0101
	CodeAccessRights       TermCode = 0x0102
	CodeSTagNotAssociated  TermCode = 0x0103
	CodeTOWrap             TermCode = 0x0104
	CodeProtCannotInval    TermCode = 0x0109
	CodeProtUnspecified    TermCode = 0x01ff
	CodeInvalidVersion     TermCode = 0x0205
	CodeUnexpectedOpcode   TermCode = 0x0206
	CodeStreamCatastrophic TermCode = 0x0207
	CodeGlobalCatastrophic TermCode = 0x0208
	CodeOpCannotInval      TermCode = 0x0209
	CodeOpUnspecified      TermCode = 0x02ff

	// DDP, layer 1: the same values as the ddp package's ErrCode constants.
	CodeDDPLocalCatastrophic = TermCode(ddp.ErrLocalCatastrophic)
	CodeDDPInvalidSTag       = TermCode(ddp.ErrTaggedInvalidSTag)
	CodeDDPBaseBounds        = TermCode(ddp.ErrTaggedBaseBounds)
	CodeDDPSTagNotAssociated = TermCode(ddp.ErrTaggedSTagNotAssociated)
	CodeDDPTOWrap            = TermCode(ddp.ErrTaggedTOWrap)
	CodeDDPTaggedVersion     = TermCode(ddp.ErrTaggedVersion)
	CodeDDPInvalidQN         = TermCode(ddp.ErrUntaggedInvalidQN)
	CodeDDPNoBuffer          = TermCode(ddp.ErrUntaggedNoBuffer)
	CodeDDPMSNRange          = TermCode(ddp.ErrUntaggedMSNRange)
	CodeDDPInvalidMO         = TermCode(ddp.ErrUntaggedInvalidMO)
	CodeDDPTooLong           = TermCode(ddp.ErrUntaggedTooLong)
	CodeDDPUntaggedVersion   = TermCode(ddp.ErrUntaggedVersion)

	// LLP (MPA), layer 2, error type 0. RFC 5044 defines 0x01–0x04, RFC
	// 6581 adds 0x05–0x07.
	CodeMPAConnectionLost    TermCode = 0x2001
	CodeMPACRC               TermCode = 0x2002
	CodeMPAMarker            TermCode = 0x2003
	CodeMPAInvalidFrame      TermCode = 0x2004
	CodeMPALocalCatastrophic TermCode = 0x2005
	CodeMPAInsufficientIRD   TermCode = 0x2006
	CodeMPANoMatchingRTR     TermCode = 0x2007
)

// MakeTermCode assembles a code from its parts (etype and layer are masked
// to 4 bits).
func MakeTermCode(layer, etype, code uint8) TermCode {
	return TermCode(layer&0x0f)<<12 | TermCode(etype&0x0f)<<8 | TermCode(code)
}

// Layer returns the layer: 0 RDMAP, 1 DDP, 2 LLP (MPA).
func (c TermCode) Layer() uint8 { return uint8(c >> 12) }

// EType returns the error type.
func (c TermCode) EType() uint8 { return uint8(c>>8) & 0x0f }

// Code returns the error code.
func (c TermCode) Code() uint8 { return uint8(c) }

// TermCodeOf returns the Terminate code of err: that of the first error in
// its chain implementing TerminateCode() uint16 (the contract shared by the
// mpa, ddp and rdmap packages). ok is false if there is none.
func TermCodeOf(err error) (c TermCode, ok bool) {
	var tc interface{ TerminateCode() uint16 }
	if errors.As(err, &tc) {
		return TermCode(tc.TerminateCode()), true
	}
	return 0, false
}

type typeNames struct {
	name  string
	all   bool // registered for every code
	codes map[uint8]string
}

var layerNames = [3]string{"RDMAP", "DDP", "LLP"}

// termNames holds the IANA registry names, indexed by layer<<4 | etype.
var termNames = map[uint8]typeNames{
	0x00: {name: "Local Catastrophic Error", all: true},
	0x01: {name: "Remote Protection Error", codes: map[uint8]string{
		0x00: "Invalid Steering Tag",
		0x01: "Base or bounds violation",
		0x02: "Access rights violation",
		0x03: "Steering Tag not associated with RDMAP Stream",
		0x04: "Tagged Offset wrap",
		0x09: "STag cannot be invalidated",
		0xff: "Unspecified Error",
	}},
	0x02: {name: "Remote Operation Error", codes: map[uint8]string{
		0x05: "Invalid RDMAP version",
		0x06: "Unexpected OpCode",
		0x07: "Catastrophic error, localized to RDMAP Stream",
		0x08: "Catastrophic error, global",
		0x09: "STag cannot be Invalidated",
		0xff: "Unspecified Error",
	}},
	0x10: {name: "Local Catastrophic", codes: map[uint8]string{0x00: "Local Catastrophic"}},
	0x11: {name: "Tagged Buffer Error", codes: map[uint8]string{
		0x00: "Invalid Steering Tag",
		0x01: "Base or bounds violation",
		0x02: "Steering Tag not associated with DDP Stream",
		0x03: "Tagged Offset wrap",
		0x04: "Invalid DDP version",
	}},
	0x12: {name: "Untagged Buffer Error", codes: map[uint8]string{
		0x01: "Invalid Queue Number",
		0x02: "Invalid MSN - no buffer available",
		0x03: "Invalid MSN - MSN range is not valid",
		0x04: "Invalid Message Offset",
		0x05: "DDP Message too long for available buffer",
		0x06: "Invalid DDP version",
	}},
	0x13: {name: "Reserved for use by Lower Layer Protocol", all: true},
	0x20: {name: "MPA Error", codes: mpaCodes},
}

var mpaCodes = map[uint8]string{
	0x01: "TCP connection closed, terminated, or lost",
	0x02: "MPA CRC Error",
	0x03: "MPA Marker and ULPDU Length field mismatch",
	0x04: "Invalid MPA Request Frame or MPA Response Frame",
	0x05: "Local catastrophic error",
	0x06: "Insufficient IRD resources",
	0x07: "No matching RTR option",
}

// Defined reports whether c is registered with IANA.
func (c TermCode) Defined() bool {
	tn, ok := termNames[c.Layer()<<4|c.EType()]
	if !ok || c.Layer() > LayerLLP {
		return false
	}
	if tn.all {
		return true
	}
	_, ok = tn.codes[c.Code()]
	return ok
}

// Known reports whether c is registered, or is an MPA error sent with
// error type 3 instead of 0 — the form irdma, i40iw, nes, cxgb3 and cxgb4
// send (layer 2 with DDP_LLP, the DDP "reserved for the LLP" type:
// irdma_bld_terminate_hdr() in irdma/ctrl.c, build_term_codes() in
// cxgb4/qp.c).
func (c TermCode) Known() bool {
	if c.Defined() {
		return true
	}
	_, ok := mpaCodes[c.Code()]
	return c.Layer() == LayerLLP && c.EType() == 3 && ok
}

// String returns the registry names and the triple, e.g. "DDP Untagged
// Buffer Error: Invalid MSN - no buffer available (1/2/0x02)".
func (c TermCode) String() string {
	triple := " (" + strconv.Itoa(int(c.Layer())) + "/" + strconv.Itoa(int(c.EType())) +
		"/0x" + hex2pad(c.Code()) + ")"
	layer := "layer " + strconv.Itoa(int(c.Layer()))
	if c.Layer() <= LayerLLP {
		layer = layerNames[c.Layer()]
	}
	tn, ok := termNames[c.Layer()<<4|c.EType()]
	if c.Layer() == LayerLLP && c.EType() == 3 {
		tn, ok = typeNames{name: "MPA Error (error type 3, as hardware sends it)", codes: mpaCodes}, true
	}
	if !ok || c.Layer() > LayerLLP {
		return layer + " error type " + strconv.Itoa(int(c.EType())) + ": unknown" + triple
	}
	if tn.all {
		return layer + " " + tn.name + triple
	}
	name, ok := tn.codes[c.Code()]
	if !ok {
		name = "unknown code"
	}
	return layer + " " + tn.name + ": " + name + triple
}

func hex2pad(v uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4], digits[v&0x0f]})
}
