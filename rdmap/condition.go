package rdmap

import "github.com/iwarp-go/iwarp-go/ddp"

// Condition names an error condition that ends a stream with a Terminate.
// The names are stable identifiers shared with docs/rfc-notes/terminate.md,
// whose table a test compares with [Conditions] row by row.
type Condition uint8

// Conditions. The comment gives the code sent; docs/rfc-notes/terminate.md
// says where implementations differ and why this code was chosen.
const (
	_ Condition = iota

	// DDP layer.
	DDPVersionTagged       // 1/1/0x04
	DDPVersionUntagged     // 1/2/0x06
	SegmentTooShort        // 1/0/0x00 ULPDU shorter than the opcode's header
	DDPLocalCatastrophic   // 1/0/0x00
	UntaggedInvalidQN      // 1/2/0x01
	SendMSNRange           // 1/2/0x03
	SendInvalidMO          // 1/2/0x04
	SendNoBuffer           // 1/2/0x02
	SendTooLong            // 1/2/0x05
	ReadReqMSNRange        // 1/2/0x03
	ReadReqInvalidMO       // 1/2/0x04
	WriteInvalidSTag       // 1/1/0x00
	WriteBaseBounds        // 1/1/0x01
	WriteSTagNotAssociated // 1/1/0x02
	WriteTOWrap            // 1/1/0x03
	WriteAccessRights      // 0/1/0x02
	TaggedSTagChanged      // 1/1/0x00
	TaggedTONotContiguous  // 1/1/0x01
	ReadRespInvalidSTag    // 1/1/0x00
	ReadRespBaseBounds     // 1/1/0x01

	// RDMAP layer.
	RDMAPVersion               // 0/2/0x05
	UnexpectedOpcode           // 0/2/0x06
	TaggedFlagMismatch         // 0/2/0x06
	ReadRespUnexpected         // 0/2/0x06
	ReadReqIRDExceeded         // 0/2/0x07
	ReadReqMalformed           // 0/2/0x07
	ReadReqSourceInvalidSTag   // 0/1/0x00
	ReadReqSourceBaseBounds    // 0/1/0x01
	ReadReqSourceAccessRights  // 0/1/0x02
	ReadReqSourceNotAssociated // 0/1/0x03
	ReadReqSourceTOWrap        // 0/1/0x04
	SendInvCannotInvalidate    // 0/2/0x09
	SendInvProtection          // 0/1/0x09
	RDMAPLocalCatastrophic     // 0/0/0x00

	// LLP (MPA) layer.
	ConnectionLost       // 2/0/0x01
	CRCError             // 2/0/0x02
	MarkerMismatch       // 2/0/0x03
	FPDULengthInvalid    // 2/0/0x03
	InvalidMPAFrame      // 2/0/0x04
	MPALocalCatastrophic // 2/0/0x05
	InsufficientIRD      // 2/0/0x06
	NoMatchingRTR        // 2/0/0x07

	numConditions
)

type condInfo struct {
	name string
	code TermCode
	// readReq: the offending message is an RDMA Read Request, so its
	// 28-byte header is available to attach.
	readReq bool
	// bare: never attach anything, whatever the code's policy.
	bare bool
}

var condTable = [numConditions]condInfo{
	DDPVersionTagged:       {"DDPVersionTagged", CodeDDPTaggedVersion, false, false},
	DDPVersionUntagged:     {"DDPVersionUntagged", CodeDDPUntaggedVersion, false, false},
	SegmentTooShort:        {"SegmentTooShort", CodeDDPLocalCatastrophic, false, true},
	DDPLocalCatastrophic:   {"DDPLocalCatastrophic", CodeDDPLocalCatastrophic, false, false},
	UntaggedInvalidQN:      {"UntaggedInvalidQN", CodeDDPInvalidQN, false, false},
	SendMSNRange:           {"SendMSNRange", CodeDDPMSNRange, false, false},
	SendInvalidMO:          {"SendInvalidMO", CodeDDPInvalidMO, false, false},
	SendNoBuffer:           {"SendNoBuffer", CodeDDPNoBuffer, false, false},
	SendTooLong:            {"SendTooLong", CodeDDPTooLong, false, false},
	ReadReqMSNRange:        {"ReadReqMSNRange", CodeDDPMSNRange, false, false},
	ReadReqInvalidMO:       {"ReadReqInvalidMO", CodeDDPInvalidMO, false, false},
	WriteInvalidSTag:       {"WriteInvalidSTag", CodeDDPInvalidSTag, false, false},
	WriteBaseBounds:        {"WriteBaseBounds", CodeDDPBaseBounds, false, false},
	WriteSTagNotAssociated: {"WriteSTagNotAssociated", CodeDDPSTagNotAssociated, false, false},
	WriteTOWrap:            {"WriteTOWrap", CodeDDPTOWrap, false, false},
	WriteAccessRights:      {"WriteAccessRights", CodeAccessRights, false, false},
	TaggedSTagChanged:      {"TaggedSTagChanged", CodeDDPInvalidSTag, false, false},
	TaggedTONotContiguous:  {"TaggedTONotContiguous", CodeDDPBaseBounds, false, false},
	ReadRespInvalidSTag:    {"ReadRespInvalidSTag", CodeDDPInvalidSTag, false, false},
	ReadRespBaseBounds:     {"ReadRespBaseBounds", CodeDDPBaseBounds, false, false},

	RDMAPVersion:               {"RDMAPVersion", CodeInvalidVersion, false, false},
	UnexpectedOpcode:           {"UnexpectedOpcode", CodeUnexpectedOpcode, false, false},
	TaggedFlagMismatch:         {"TaggedFlagMismatch", CodeUnexpectedOpcode, false, false},
	ReadRespUnexpected:         {"ReadRespUnexpected", CodeUnexpectedOpcode, false, false},
	ReadReqIRDExceeded:         {"ReadReqIRDExceeded", CodeStreamCatastrophic, false, false},
	ReadReqMalformed:           {"ReadReqMalformed", CodeStreamCatastrophic, false, false},
	ReadReqSourceInvalidSTag:   {"ReadReqSourceInvalidSTag", CodeInvalidSTag, true, false},
	ReadReqSourceBaseBounds:    {"ReadReqSourceBaseBounds", CodeBaseBounds, true, false},
	ReadReqSourceAccessRights:  {"ReadReqSourceAccessRights", CodeAccessRights, true, false},
	ReadReqSourceNotAssociated: {"ReadReqSourceNotAssociated", CodeSTagNotAssociated, true, false},
	ReadReqSourceTOWrap:        {"ReadReqSourceTOWrap", CodeTOWrap, true, false},
	SendInvCannotInvalidate:    {"SendInvCannotInvalidate", CodeOpCannotInval, false, false},
	SendInvProtection:          {"SendInvProtection", CodeProtCannotInval, false, false},
	RDMAPLocalCatastrophic:     {"RDMAPLocalCatastrophic", CodeLocalCatastrophic, false, false},

	ConnectionLost:       {"ConnectionLost", CodeMPAConnectionLost, false, false},
	CRCError:             {"CRCError", CodeMPACRC, false, false},
	MarkerMismatch:       {"MarkerMismatch", CodeMPAMarker, false, false},
	FPDULengthInvalid:    {"FPDULengthInvalid", CodeMPAMarker, false, false},
	InvalidMPAFrame:      {"InvalidMPAFrame", CodeMPAInvalidFrame, false, false},
	MPALocalCatastrophic: {"MPALocalCatastrophic", CodeMPALocalCatastrophic, false, false},
	InsufficientIRD:      {"InsufficientIRD", CodeMPAInsufficientIRD, false, false},
	NoMatchingRTR:        {"NoMatchingRTR", CodeMPANoMatchingRTR, false, false},
}

// Conditions returns every defined condition in table order.
func Conditions() []Condition {
	cs := make([]Condition, 0, numConditions-1)
	for c := Condition(1); c < numConditions; c++ {
		cs = append(cs, c)
	}
	return cs
}

// ConditionByName returns the condition with the given identifier.
func ConditionByName(name string) (Condition, bool) {
	for c := Condition(1); c < numConditions; c++ {
		if condTable[c].name == name {
			return c, true
		}
	}
	return 0, false
}

func (c Condition) valid() bool { return c > 0 && c < numConditions }

// String returns the stable identifier, e.g. "SendNoBuffer".
func (c Condition) String() string {
	if !c.valid() {
		return "Condition(" + hex2pad(uint8(c)) + ")"
	}
	return condTable[c].name
}

// Code returns the Terminate code sent for c; RDMAPLocalCatastrophic for an
// undefined condition.
func (c Condition) Code() TermCode {
	if !c.valid() {
		return CodeLocalCatastrophic
	}
	return condTable[c].code
}

// Flags returns the M, D and R flags of the Terminate sent for c when the
// offending segment's DDP header is at hand (and, for conditions about an
// RDMA Read Request, its 28-byte header): the attachment policy of
// [NewTerminate] applied to c.
func (c Condition) Flags() (m, d, r bool) {
	d, r = c.attach()
	r = r && c.valid() && condTable[c].readReq
	return d, d, r
}

// attach is the attachment policy for c: that of its code, except for
// conditions marked bare (a segment too short for its header is reported
// without any of it, even when its DDP header happens to be complete).
func (c Condition) attach() (ddpHdr, rdmaHdr bool) {
	if c.valid() && condTable[c].bare {
		return false, false
	}
	return attachPolicy(c.Code())
}

// ReadReqSourceCondition returns the condition for an RDMA Read Request
// whose data source failed the region checks for reason f. RDMAP reports
// these as Remote Protection errors (layer 0, type 1) with the Read Request
// header attached.
func ReadReqSourceCondition(f ddp.PlacementFailure) Condition {
	switch f {
	case ddp.FailNotAssociated:
		return ReadReqSourceNotAssociated
	case ddp.FailAccessRights:
		return ReadReqSourceAccessRights
	case ddp.FailBaseBounds:
		return ReadReqSourceBaseBounds
	case ddp.FailTOWrap:
		return ReadReqSourceTOWrap
	}
	return ReadReqSourceInvalidSTag
}

// WriteCondition returns the condition for an RDMA Write whose sink failed
// the region checks for reason f; its code is f.Code().
func WriteCondition(f ddp.PlacementFailure) Condition {
	switch f {
	case ddp.FailNotAssociated:
		return WriteSTagNotAssociated
	case ddp.FailAccessRights:
		return WriteAccessRights
	case ddp.FailBaseBounds:
		return WriteBaseBounds
	case ddp.FailTOWrap:
		return WriteTOWrap
	}
	return WriteInvalidSTag
}
