package stag

import "errors"

// Errors of the management calls (registration, deregistration, references).
// Checks on the data path report a Failure instead.
var (
	// ErrBadAccess: the rights given to Register are not a valid set.
	ErrBadAccess = errors.New("stag: invalid access rights")
	// ErrEmptyRegion: Register was given an empty buffer.
	ErrEmptyRegion = errors.New("stag: empty region")
	// ErrBaseOverflow: base TO + region length does not fit in 64 bits.
	ErrBaseOverflow = errors.New("stag: base tagged offset + length overflows 64 bits")
	// ErrTableFull: the table holds its configured maximum of regions.
	ErrTableFull = errors.New("stag: table full")
	// ErrBusy: Deregister was called while local work holds references.
	ErrBusy = errors.New("stag: region busy: references held")
	// ErrDeregistered: the region was already deregistered.
	ErrDeregistered = errors.New("stag: region deregistered")
	// ErrNotInvalid: Revalidate was called on a region that is not invalid.
	ErrNotInvalid = errors.New("stag: region is not in the invalid state")
	// ErrTooManyRefs: Acquire would overflow the reference count.
	ErrTooManyRefs = errors.New("stag: too many references")
	// ErrWindowsBound: the region cannot be invalidated or deregistered
	// while memory windows are bound to it.
	ErrWindowsBound = errors.New("stag: memory windows bound to the region")
	// ErrBadBind: a window bind names no region, a region of another PD,
	// a region without MWBind, rights it does not grant, or a range
	// outside it.
	ErrBadBind = errors.New("stag: invalid memory window bind")
	// ErrWindowBound: a type 2 window was bound again while bound.
	ErrWindowBound = errors.New("stag: type 2 memory window already bound")
	// ErrIsWindow: a region-only call was given a window's STag.
	ErrIsWindow = errors.New("stag: STag names a memory window")
	// ErrBadOption: a table option was given an out-of-range value.
	ErrBadOption = errors.New("stag: invalid option")
)
