package ddp

import (
	"fmt"
	"strconv"
)

// ErrCode is the Terminate code of an error found while receiving a DDP
// segment, encoded as layer<<12 | error type<<8 | error code (the layout of
// the first 16 bits of the RDMAP Terminate Control field). Layer 1 codes are
// RFC 5041 §7's DDP error numbers as registered with IANA (RDDP registry,
// "DDP Errors"). ErrAccessRights is the one RDMAP (layer 0) code a DDP
// placement check can produce; see [PlacementFailure].
//
// ErrCode implements error so that the constants work with errors.Is.
type ErrCode uint16

// DDP error codes (IANA RDDP "DDP Errors", layer 1).
const (
	ErrLocalCatastrophic ErrCode = 0x1000 // 1/0/0x00

	ErrTaggedInvalidSTag       ErrCode = 0x1100 // 1/1/0x00
	ErrTaggedBaseBounds        ErrCode = 0x1101 // 1/1/0x01
	ErrTaggedSTagNotAssociated ErrCode = 0x1102 // 1/1/0x02
	ErrTaggedTOWrap            ErrCode = 0x1103 // 1/1/0x03
	ErrTaggedVersion           ErrCode = 0x1104 // 1/1/0x04

	ErrUntaggedInvalidQN ErrCode = 0x1201 // 1/2/0x01
	ErrUntaggedNoBuffer  ErrCode = 0x1202 // 1/2/0x02 invalid MSN, no buffer available
	ErrUntaggedMSNRange  ErrCode = 0x1203 // 1/2/0x03 invalid MSN, MSN range is not valid
	ErrUntaggedInvalidMO ErrCode = 0x1204 // 1/2/0x04
	ErrUntaggedTooLong   ErrCode = 0x1205 // 1/2/0x05 message too long for available buffer
	ErrUntaggedVersion   ErrCode = 0x1206 // 1/2/0x06

	// ErrAccessRights is RDMAP 0/1/0x02, "Remote Protection Error / Access
	// rights violation". DDP has no access-rights code; see
	// [FailAccessRights] for why this code is used.
	ErrAccessRights ErrCode = 0x0102
)

// Layer returns the 4-bit Terminate layer (1 = DDP).
func (c ErrCode) Layer() uint8 { return uint8(c >> 12) }

// EType returns the 4-bit error type.
func (c ErrCode) EType() uint8 { return uint8(c>>8) & 0x0f }

// Code returns the 8-bit error code.
func (c ErrCode) Code() uint8 { return uint8(c) }

// TerminateCode returns c as layer<<12 | etype<<8 | code.
func (c ErrCode) TerminateCode() uint16 { return uint16(c) }

var errNames = map[ErrCode]string{
	ErrLocalCatastrophic:       "local catastrophic error",
	ErrTaggedInvalidSTag:       "tagged buffer error: invalid STag",
	ErrTaggedBaseBounds:        "tagged buffer error: base or bounds violation",
	ErrTaggedSTagNotAssociated: "tagged buffer error: STag not associated with DDP stream",
	ErrTaggedTOWrap:            "tagged buffer error: TO wrap",
	ErrTaggedVersion:           "tagged buffer error: invalid DDP version",
	ErrUntaggedInvalidQN:       "untagged buffer error: invalid QN",
	ErrUntaggedNoBuffer:        "untagged buffer error: invalid MSN - no buffer available",
	ErrUntaggedMSNRange:        "untagged buffer error: invalid MSN - MSN range is not valid",
	ErrUntaggedInvalidMO:       "untagged buffer error: invalid MO",
	ErrUntaggedTooLong:         "untagged buffer error: DDP message too long for available buffer",
	ErrUntaggedVersion:         "untagged buffer error: invalid DDP version",
	ErrAccessRights:            "RDMAP remote protection error: access rights violation",
}

// String returns the registered name and the triple, e.g.
// "untagged buffer error: invalid QN (1/2/0x01)".
func (c ErrCode) String() string {
	name, ok := errNames[c]
	if !ok {
		name = "unknown DDP error"
	}
	return name + " (" + strconv.Itoa(int(c.Layer())) + "/" + strconv.Itoa(int(c.EType())) +
		"/0x" + hex2(c.Code()) + ")"
}

// Error implements error.
func (c ErrCode) Error() string { return "ddp: " + c.String() }

func hex2(v uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4], digits[v&0x0f]})
}

// Error is a DDP segment that failed a receive check. It carries what a
// Terminate reports about the offending segment: a copy of its DDP header
// (14 or 18 bytes, fewer if the segment was too short to hold one) and its
// segment length.
type Error struct {
	Code ErrCode
	// SegmentLen is the length of the offending DDP segment as framed by the
	// lower layer: DDP header plus payload (the MPA ULPDU Length).
	SegmentLen int

	hdr    [MaxHeaderLen]byte
	hdrLen uint8
}

// NewError returns an *Error for code with a copy of the DDP header at the
// start of hdr and the offending segment length. The copy holds as many
// bytes as the header's T flag implies, but never more than hdr or the
// segment holds.
func NewError(code ErrCode, hdr []byte, segLen int) *Error {
	e := &Error{Code: code, SegmentLen: segLen}
	e.hdrLen = copyHeader(&e.hdr, hdr, segLen)
	return e
}

// copyHeader copies the DDP header at the start of hdr into dst, bounded by
// the header length its T flag implies, len(hdr) and segLen.
func copyHeader(dst *[MaxHeaderLen]byte, hdr []byte, segLen int) uint8 {
	if len(hdr) == 0 || segLen <= 0 {
		return 0
	}
	n := min(HeaderLen(Control(hdr[0])), len(hdr), segLen)
	return uint8(copy(dst[:n], hdr))
}

// CopyHeader copies the DDP header at the start of hdr into dst as NewError
// does and returns the number of bytes copied.
func CopyHeader(dst *[MaxHeaderLen]byte, hdr []byte, segLen int) int {
	return int(copyHeader(dst, hdr, segLen))
}

// Header returns the copy of the offending DDP header. It is shorter than
// the header length if the segment was truncated, and empty if none was
// recorded.
func (e *Error) Header() []byte { return e.hdr[:e.hdrLen] }

// HeaderComplete reports whether the recorded header is a whole tagged or
// untagged header, as a Terminate's "Terminated DDP Header" must be.
func (e *Error) HeaderComplete() bool {
	return e.hdrLen > 0 && int(e.hdrLen) == HeaderLen(Control(e.hdr[0]))
}

// TerminateCode returns the code as layer<<12 | etype<<8 | code.
func (e *Error) TerminateCode() uint16 { return uint16(e.Code) }

// Is reports whether target is the same code, given as an ErrCode or as an
// *Error.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case ErrCode:
		return t == e.Code
	case *Error:
		return t.Code == e.Code
	}
	return false
}

// Error describes the failure and the offending header's fields.
func (e *Error) Error() string {
	h := e.Header()
	switch {
	case e.HeaderComplete() && Control(h[0]).Tagged():
		t := Tagged(h)
		return fmt.Sprintf("ddp: %v: tagged segment STag %#08x TO %#x, segment length %d",
			e.Code.String(), t.STag(), t.TO(), e.SegmentLen)
	case e.HeaderComplete():
		u := Untagged(h)
		return fmt.Sprintf("ddp: %v: untagged segment QN %d MSN %d MO %d, segment length %d",
			e.Code.String(), u.QN(), u.MSN(), u.MO(), e.SegmentLen)
	}
	return fmt.Sprintf("ddp: %v: segment length %d", e.Code.String(), e.SegmentLen)
}
