package termcode

import "strconv"

// The registered codes (IANA RDDP registry, RFC 6580). The MPA codes
// 0x01–0x04 are RFC 5044's, 0x05–0x07 RFC 6581's.
const (
	// RDMAP, layer 0. Local catastrophic is registered for every error
	// code; 0x00 is the one this module sends.
	RDMAPLocalCatastrophic    Code = 0x0000
	RDMAPInvalidSTag          Code = 0x0100
	RDMAPBaseBounds           Code = 0x0101
	RDMAPAccessRights         Code = 0x0102
	RDMAPSTagNotAssociated    Code = 0x0103
	RDMAPTOWrap               Code = 0x0104
	RDMAPProtCannotInvalidate Code = 0x0109
	RDMAPProtUnspecified      Code = 0x01ff
	RDMAPInvalidVersion       Code = 0x0205
	RDMAPUnexpectedOpcode     Code = 0x0206
	RDMAPStreamCatastrophic   Code = 0x0207
	RDMAPGlobalCatastrophic   Code = 0x0208
	RDMAPOpCannotInvalidate   Code = 0x0209
	RDMAPOpUnspecified        Code = 0x02ff

	// DDP, layer 1 (RFC 5041 §7).
	DDPLocalCatastrophic       Code = 0x1000
	DDPTaggedInvalidSTag       Code = 0x1100
	DDPTaggedBaseBounds        Code = 0x1101
	DDPTaggedSTagNotAssociated Code = 0x1102
	DDPTaggedTOWrap            Code = 0x1103
	DDPTaggedVersion           Code = 0x1104
	DDPUntaggedInvalidQN       Code = 0x1201
	DDPUntaggedNoBuffer        Code = 0x1202
	DDPUntaggedMSNRange        Code = 0x1203
	DDPUntaggedInvalidMO       Code = 0x1204
	DDPUntaggedTooLong         Code = 0x1205
	DDPUntaggedVersion         Code = 0x1206

	// LLP (MPA), layer 2, error type 0.
	MPAConnectionLost    Code = 0x2001
	MPACRC               Code = 0x2002
	MPAMarker            Code = 0x2003
	MPAInvalidFrame      Code = 0x2004
	MPALocalCatastrophic Code = 0x2005
	MPAInsufficientIRD   Code = 0x2006
	MPANoMatchingRTR     Code = 0x2007
)

type typeNames struct {
	name  string
	all   bool // registered for every code
	codes map[uint8]string
}

// registry holds the IANA names, indexed by layer<<4 | etype.
var registry = map[uint8]typeNames{
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
	0x20: {name: "MPA Error", codes: mpaNames},
}

var mpaNames = map[uint8]string{
	0x01: "TCP connection closed, terminated, or lost",
	0x02: "MPA CRC Error",
	0x03: "MPA Marker and ULPDU Length field mismatch",
	0x04: "Invalid MPA Request Frame or MPA Response Frame",
	0x05: "Local catastrophic error",
	0x06: "Insufficient IRD resources",
	0x07: "No matching RTR option",
}

// Defined reports whether c is registered with IANA.
func (c Code) Defined() bool {
	tn, ok := registry[uint8(c.Layer())<<4|c.EType()]
	if !ok || c.Layer() > LLP {
		return false
	}
	if tn.all {
		return true
	}
	_, ok = tn.codes[c.ECode()]
	return ok
}

// Known reports whether c is registered, or is an MPA error sent with
// error type 3 instead of 0 — the form irdma, i40iw, nes, cxgb3 and cxgb4
// send (layer 2 with DDP's "reserved for the LLP" type:
// irdma_bld_terminate_hdr() in irdma/ctrl.c, build_term_codes() in
// cxgb4/qp.c). Receivers accept both.
func (c Code) Known() bool {
	if c.Defined() {
		return true
	}
	_, ok := mpaNames[c.ECode()]
	return c.Layer() == LLP && c.EType() == 3 && ok
}

// Name returns the registry's name for c's error type and code, e.g.
// "Untagged Buffer Error: Invalid MSN - no buffer available", or a
// description of why it has none.
func (c Code) Name() string {
	tn, ok := registry[uint8(c.Layer())<<4|c.EType()]
	if c.Layer() == LLP && c.EType() == 3 {
		tn, ok = typeNames{name: "MPA Error (error type 3, as hardware sends it)", codes: mpaNames}, true
	}
	if !ok || c.Layer() > LLP {
		return "error type " + strconv.Itoa(int(c.EType())) + ": unknown"
	}
	if tn.all {
		return tn.name
	}
	name, ok := tn.codes[c.ECode()]
	if !ok {
		name = "unknown code"
	}
	return tn.name + ": " + name
}

// String returns the layer, the registry names and the triple, e.g. "DDP
// Untagged Buffer Error: Invalid MSN - no buffer available (1/2/0x02)".
func (c Code) String() string {
	return c.Layer().String() + " " + c.Name() + " (" + c.Triple() + ")"
}

// Triple returns c as layer/etype/0xcode, e.g. "1/2/0x02".
func (c Code) Triple() string {
	const digits = "0123456789abcdef"
	v := c.ECode()
	return strconv.Itoa(int(c.Layer())) + "/" + strconv.Itoa(int(c.EType())) +
		"/0x" + string([]byte{digits[v>>4], digits[v&0x0f]})
}
