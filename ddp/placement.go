package ddp

// PlacementFailure is why the STag and TO of a tagged segment cannot be used
// to place its payload. Regions live in the stag package, which ddp does not
// import; the caller translates that package's failure kinds into these.
type PlacementFailure uint8

// Placement failure kinds.
const (
	// FailInvalidSTag: no region has this STag index, or it was freed.
	FailInvalidSTag PlacementFailure = iota + 1
	// FailKeyMismatch: the index exists but the 8-bit key differs.
	FailKeyMismatch
	// FailInvalidated: the region exists but is in the invalid state.
	FailInvalidated
	// FailNotAssociated: the region belongs to another protection domain,
	// so the STag is not associated with this stream.
	FailNotAssociated
	// FailAccessRights: the region lacks the remote right the operation
	// needs (remote write for an RDMA Write).
	FailAccessRights
	// FailBaseBounds: [TO, TO+len) is not inside the region.
	FailBaseBounds
	// FailTOWrap: TO+len wraps past 2^64.
	FailTOWrap
)

var placementNames = [...]string{
	FailInvalidSTag:   "invalid STag",
	FailKeyMismatch:   "STag key mismatch",
	FailInvalidated:   "STag invalidated",
	FailNotAssociated: "STag not associated with this stream",
	FailAccessRights:  "access rights violation",
	FailBaseBounds:    "base or bounds violation",
	FailTOWrap:        "tagged offset wrap",
}

func (f PlacementFailure) String() string {
	if int(f) < len(placementNames) && placementNames[f] != "" {
		return placementNames[f]
	}
	return "unknown placement failure"
}

// Code returns the Terminate code for a tagged segment (RDMA Write or RDMA
// Read Response) that failed placement for reason f:
//
//   - invalid, key mismatch, invalidated: 1/1/0x00 Invalid STag
//   - not associated (PD mismatch):       1/1/0x02
//   - base or bounds:                     1/1/0x01
//   - TO wrap:                            1/1/0x03
//   - access rights:                      0/1/0x02 (RDMAP)
//
// DDP's tagged error numbers have no access-rights code. Linux siw reports a
// missing remote-write right as DDP 1/1/0x00 (its comment in siw_qp.c says
// so); irdma, cxgb4 and nes report RDMAP 0/1/0x02 "Access rights
// violation", the only registered code that names the condition. We send
// 0/1/0x02. docs/rfc-notes/terminate.md records siw's deviation.
func (f PlacementFailure) Code() ErrCode {
	switch f {
	case FailNotAssociated:
		return ErrTaggedSTagNotAssociated
	case FailAccessRights:
		return ErrAccessRights
	case FailBaseBounds:
		return ErrTaggedBaseBounds
	case FailTOWrap:
		return ErrTaggedTOWrap
	}
	return ErrTaggedInvalidSTag
}

// PlacementError returns the error for a tagged segment with header h and
// segment length segLen that failed placement for reason f.
func PlacementError(f PlacementFailure, h Tagged, segLen int) *Error {
	return NewError(f.Code(), h, segLen)
}
