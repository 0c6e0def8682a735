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
	// deregistered), a region registered with NoRemoteInvalidate or with
	// windows bound to it, or a type 1 memory window (which only its
	// owner's Bind and Invalidate change, as in verbs).
	CannotInvalidate

	// QPMismatch: the STag names a type 2 memory window bound through
	// another stream (queue pair). On the wire it is "STag not associated
	// with this stream"; for an invalidation, "cannot be invalidated"
	// with the protection type (RFC 5040 §5.3 and §8.1.1 items 2 and 7).
	QPMismatch
	// BoundWindows: a local invalidation names a region that memory
	// windows are bound to.
	BoundWindows
	// SharedStreams: a Send with Invalidate names a region of a PD that
	// more than one stream uses (RFC 5040 §8.1.1 item 7). On the wire it
	// is "cannot be invalidated" with the protection type, like
	// CannotInvalidatePD.
	SharedStreams

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
	QPMismatch:         "STag not associated with this stream (window of another queue pair)",
	BoundWindows:       "region has memory windows bound",
	SharedStreams:      "STag cannot be invalidated (shared on multiple streams)",
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
