package rdmap

import (
	"strconv"

	"github.com/iwarp-go/iwarp-go/termcode"
)

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
	WriteAccessRights      // 1/1/0x00
	TaggedSTagChanged      // 1/1/0x00
	TaggedTONotContiguous  // 1/1/0x01
	ReadRespInvalidSTag    // 1/1/0x00
	ReadRespBaseBounds     // 1/1/0x01

	// RDMAP layer.
	RDMAPVersion               // 0/2/0x05
	UnexpectedOpcode           // 0/2/0x06
	TaggedFlagMismatch         // 0/2/0x06
	ReadRespUnexpected         // 0/2/0x06
	ReadReqIRDExceeded         // 1/2/0x02
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

	// RFC 7306 (rdmap/rfc7306.go). Its registry update adds no codes;
	// these are the RFC 5040 codes of the nearest Read Request condition.
	AtomicMalformed           // 0/2/0x07
	AtomicMisaligned          // 0/2/0x07 the target is not 8-byte aligned
	AtomicIRDExceeded         // 1/2/0x02
	AtomicRespUnexpected      // 0/2/0x06
	AtomicTargetInvalidSTag   // 0/1/0x00
	AtomicTargetBaseBounds    // 0/1/0x01
	AtomicTargetAccessRights  // 0/1/0x02
	AtomicTargetNotAssociated // 0/1/0x03
	AtomicTargetTOWrap        // 0/1/0x04

	numConditions
)

type condInfo struct {
	name string
	code termcode.Code
	// readReq: the offending message is an RDMA Read Request, so its
	// 28-byte header is available to attach.
	readReq bool
	// bare: never attach anything, whatever the code's policy.
	bare bool
}

var condTable = [numConditions]condInfo{
	DDPVersionTagged:       {"DDPVersionTagged", termcode.DDPTaggedVersion, false, false},
	DDPVersionUntagged:     {"DDPVersionUntagged", termcode.DDPUntaggedVersion, false, false},
	SegmentTooShort:        {"SegmentTooShort", termcode.DDPLocalCatastrophic, false, true},
	DDPLocalCatastrophic:   {"DDPLocalCatastrophic", termcode.DDPLocalCatastrophic, false, false},
	UntaggedInvalidQN:      {"UntaggedInvalidQN", termcode.DDPUntaggedInvalidQN, false, false},
	SendMSNRange:           {"SendMSNRange", termcode.DDPUntaggedMSNRange, false, false},
	SendInvalidMO:          {"SendInvalidMO", termcode.DDPUntaggedInvalidMO, false, false},
	SendNoBuffer:           {"SendNoBuffer", termcode.DDPUntaggedNoBuffer, false, false},
	SendTooLong:            {"SendTooLong", termcode.DDPUntaggedTooLong, false, false},
	ReadReqMSNRange:        {"ReadReqMSNRange", termcode.DDPUntaggedMSNRange, false, false},
	ReadReqInvalidMO:       {"ReadReqInvalidMO", termcode.DDPUntaggedInvalidMO, false, false},
	WriteInvalidSTag:       {"WriteInvalidSTag", termcode.DDPTaggedInvalidSTag, false, false},
	WriteBaseBounds:        {"WriteBaseBounds", termcode.DDPTaggedBaseBounds, false, false},
	WriteSTagNotAssociated: {"WriteSTagNotAssociated", termcode.DDPTaggedSTagNotAssociated, false, false},
	WriteTOWrap:            {"WriteTOWrap", termcode.DDPTaggedTOWrap, false, false},
	WriteAccessRights:      {"WriteAccessRights", termcode.DDPTaggedInvalidSTag, false, false},
	TaggedSTagChanged:      {"TaggedSTagChanged", termcode.DDPTaggedInvalidSTag, false, false},
	TaggedTONotContiguous:  {"TaggedTONotContiguous", termcode.DDPTaggedBaseBounds, false, false},
	ReadRespInvalidSTag:    {"ReadRespInvalidSTag", termcode.DDPTaggedInvalidSTag, false, false},
	ReadRespBaseBounds:     {"ReadRespBaseBounds", termcode.DDPTaggedBaseBounds, false, false},

	RDMAPVersion:               {"RDMAPVersion", termcode.RDMAPInvalidVersion, false, false},
	UnexpectedOpcode:           {"UnexpectedOpcode", termcode.RDMAPUnexpectedOpcode, false, false},
	TaggedFlagMismatch:         {"TaggedFlagMismatch", termcode.RDMAPUnexpectedOpcode, false, false},
	ReadRespUnexpected:         {"ReadRespUnexpected", termcode.RDMAPUnexpectedOpcode, false, false},
	ReadReqIRDExceeded:         {"ReadReqIRDExceeded", termcode.DDPUntaggedNoBuffer, false, false},
	ReadReqMalformed:           {"ReadReqMalformed", termcode.RDMAPStreamCatastrophic, false, false},
	ReadReqSourceInvalidSTag:   {"ReadReqSourceInvalidSTag", termcode.RDMAPInvalidSTag, true, false},
	ReadReqSourceBaseBounds:    {"ReadReqSourceBaseBounds", termcode.RDMAPBaseBounds, true, false},
	ReadReqSourceAccessRights:  {"ReadReqSourceAccessRights", termcode.RDMAPAccessRights, true, false},
	ReadReqSourceNotAssociated: {"ReadReqSourceNotAssociated", termcode.RDMAPSTagNotAssociated, true, false},
	ReadReqSourceTOWrap:        {"ReadReqSourceTOWrap", termcode.RDMAPTOWrap, true, false},
	SendInvCannotInvalidate:    {"SendInvCannotInvalidate", termcode.RDMAPOpCannotInvalidate, false, false},
	SendInvProtection:          {"SendInvProtection", termcode.RDMAPProtCannotInvalidate, false, false},
	RDMAPLocalCatastrophic:     {"RDMAPLocalCatastrophic", termcode.RDMAPLocalCatastrophic, false, false},

	ConnectionLost:       {"ConnectionLost", termcode.MPAConnectionLost, false, false},
	CRCError:             {"CRCError", termcode.MPACRC, false, false},
	MarkerMismatch:       {"MarkerMismatch", termcode.MPAMarker, false, false},
	FPDULengthInvalid:    {"FPDULengthInvalid", termcode.MPAMarker, false, false},
	InvalidMPAFrame:      {"InvalidMPAFrame", termcode.MPAInvalidFrame, false, false},
	MPALocalCatastrophic: {"MPALocalCatastrophic", termcode.MPALocalCatastrophic, false, false},
	InsufficientIRD:      {"InsufficientIRD", termcode.MPAInsufficientIRD, false, false},
	NoMatchingRTR:        {"NoMatchingRTR", termcode.MPANoMatchingRTR, false, false},

	AtomicMalformed:           {"AtomicMalformed", termcode.RDMAPStreamCatastrophic, false, false},
	AtomicMisaligned:          {"AtomicMisaligned", termcode.RDMAPStreamCatastrophic, false, false},
	AtomicIRDExceeded:         {"AtomicIRDExceeded", termcode.DDPUntaggedNoBuffer, false, false},
	AtomicRespUnexpected:      {"AtomicRespUnexpected", termcode.RDMAPUnexpectedOpcode, false, false},
	AtomicTargetInvalidSTag:   {"AtomicTargetInvalidSTag", termcode.RDMAPInvalidSTag, false, false},
	AtomicTargetBaseBounds:    {"AtomicTargetBaseBounds", termcode.RDMAPBaseBounds, false, false},
	AtomicTargetAccessRights:  {"AtomicTargetAccessRights", termcode.RDMAPAccessRights, false, false},
	AtomicTargetNotAssociated: {"AtomicTargetNotAssociated", termcode.RDMAPSTagNotAssociated, false, false},
	AtomicTargetTOWrap:        {"AtomicTargetTOWrap", termcode.RDMAPTOWrap, false, false},
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
		return "Condition(" + strconv.Itoa(int(c)) + ")"
	}
	return condTable[c].name
}

// Code returns the Terminate code sent for c; RDMAPLocalCatastrophic for an
// undefined condition.
func (c Condition) Code() termcode.Code {
	if !c.valid() {
		return termcode.RDMAPLocalCatastrophic
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
