package stag

import "strconv"

// Failure is the outcome of a protection check. The zero value OK means the
// access is allowed; every other value names the first rule that failed.
//
// Failure implements error so it can be returned or wrapped where an error is
// wanted, but the checks return it as a plain value: no allocation, and a
// switch on the kind is a byte compare.
type Failure uint8

// Failure kinds. The order of the checks in PD.Lookup is the order below:
// the STag first, then the stream it is used on, then the rights, then the
// offsets.
const (
	OK Failure = iota

	// InvalidSTag: no region at the index, the region was deregistered, or
	// the key does not match.
	InvalidSTag
	// Invalidated: the STag names a region that was invalidated (locally or
	// by a peer's Send with Invalidate). On the wire it is an invalid STag.
	Invalidated
	// PDMismatch: the region belongs to another protection domain, so the
	// STag is not associated with this stream.
	PDMismatch
	// AccessRights: the region does not grant the right the access needs.
	AccessRights
	// BaseBounds: the addressed range starts below the region's base or
	// ends past its last byte.
	BaseBounds
	// TOWrap: TO + length does not fit in 64 bits.
	TOWrap

	// CannotInvalidatePD: a Send with Invalidate names a region of another
	// protection domain.
	CannotInvalidatePD
	// CannotInvalidate: a Send with Invalidate names an STag that is not a
	// valid region of this table (unknown, wrong key, already invalid,
	// deregistered), or a region registered with NoRemoteInvalidate.
	CannotInvalidate

	numFailures
)

var failureNames = [numFailures]string{
	OK:                 "ok",
	InvalidSTag:        "invalid STag",
	Invalidated:        "STag invalidated",
	PDMismatch:         "STag not associated with this stream",
	AccessRights:       "access rights violation",
	BaseBounds:         "base or bounds violation",
	TOWrap:             "tagged offset wrap",
	CannotInvalidatePD: "STag cannot be invalidated (other protection domain)",
	CannotInvalidate:   "STag cannot be invalidated",
}

// String names the failure.
func (f Failure) String() string {
	if f < numFailures {
		return failureNames[f]
	}
	return "Failure(" + strconv.Itoa(int(f)) + ")"
}

// Error makes a Failure usable as an error value. It is the bare name, like
// syscall.Errno, so that fmt prints a Failure the same way as String.
func (f Failure) Error() string { return f.String() }

// Terminate codes packed as layer<<12 | error type<<8 | error code, the
// notation of the IANA RDDP registry (RFC 6580) and of urdma's rdmap_errno.
const (
	codeRDMAPInvalidSTag       uint16 = 0x0100 // RDMAP / Remote Protection / Invalid STag
	codeRDMAPBaseBounds        uint16 = 0x0101 // RDMAP / Remote Protection / Base or bounds
	codeRDMAPAccessRights      uint16 = 0x0102 // RDMAP / Remote Protection / Access rights
	codeRDMAPNotAssociated     uint16 = 0x0103 // RDMAP / Remote Protection / STag not associated
	codeRDMAPTOWrap            uint16 = 0x0104 // RDMAP / Remote Protection / TO wrap
	codeRDMAPProtCannotInval   uint16 = 0x0109 // RDMAP / Remote Protection / STag cannot be invalidated
	codeRDMAPOpCannotInval     uint16 = 0x0209 // RDMAP / Remote Operation / STag cannot be invalidated
	codeDDPTaggedInvalidSTag   uint16 = 0x1100 // DDP / Tagged Buffer / Invalid STag
	codeDDPTaggedBaseBounds    uint16 = 0x1101 // DDP / Tagged Buffer / Base or bounds
	codeDDPTaggedNotAssociated uint16 = 0x1102 // DDP / Tagged Buffer / STag not associated
	codeDDPTaggedTOWrap        uint16 = 0x1103 // DDP / Tagged Buffer / TO wrap
)

// RDMAPCode returns the RDMAP Terminate code (layer<<12|etype<<8|code) for the
// failure: Remote Protection codes for the lookup kinds, as sent when the
// source of an RDMA Read Request fails its checks, and 0x0109/0x0209 for the
// two invalidation kinds. ok is false for OK.
func (f Failure) RDMAPCode() (code uint16, ok bool) {
	switch f {
	case InvalidSTag, Invalidated:
		return codeRDMAPInvalidSTag, true
	case PDMismatch:
		return codeRDMAPNotAssociated, true
	case AccessRights:
		return codeRDMAPAccessRights, true
	case BaseBounds:
		return codeRDMAPBaseBounds, true
	case TOWrap:
		return codeRDMAPTOWrap, true
	case CannotInvalidatePD:
		return codeRDMAPProtCannotInval, true
	case CannotInvalidate:
		return codeRDMAPOpCannotInval, true
	}
	return 0, false
}

// DDPTaggedCode returns the DDP Tagged Buffer Terminate code
// (layer<<12|etype<<8|code) for a failure found while placing a tagged
// segment (RDMA Write, Read Response). ok is false for OK and for the
// invalidation kinds, which are RDMAP errors only.
//
// DDP has no access-rights code: AccessRights maps to Invalid STag, as siw
// does. irdma, cxgb4 and nes send the RDMAP code 0x0102 for that case instead;
// a caller that prefers their behaviour uses RDMAPCode for AccessRights.
func (f Failure) DDPTaggedCode() (code uint16, ok bool) {
	switch f {
	case InvalidSTag, Invalidated, AccessRights:
		return codeDDPTaggedInvalidSTag, true
	case PDMismatch:
		return codeDDPTaggedNotAssociated, true
	case BaseBounds:
		return codeDDPTaggedBaseBounds, true
	case TOWrap:
		return codeDDPTaggedTOWrap, true
	}
	return 0, false
}
