package stag

import (
	"fmt"
	"sync/atomic"
)

// State is the life-cycle state of a region's STag.
type State uint8

// Region states. A registration starts valid; local or remote invalidation
// makes it invalid (its memory stays registered, accesses fail); Deregister
// frees it for good.
const (
	StateFree State = iota
	StateValid
	StateInvalid
)

// String names the state.
func (s State) String() string {
	switch s {
	case StateFree:
		return "free"
	case StateValid:
		return "valid"
	case StateInvalid:
		return "invalid"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Kind says what an STag names: a registered region, or the binding of a
// memory window, which narrows a region's range and rights under its own
// STag (window.go).
type Kind uint8

// Region kinds.
const (
	KindMemoryRegion Kind = iota
	KindMemoryWindow
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindMemoryRegion:
		return "MR"
	case KindMemoryWindow:
		return "MW"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// The mutable part of a region is one 64-bit word so that a lookup reads the
// STag and the state consistently with a single atomic load, and so that
// Acquire and Deregister decide against each other with one CAS each:
//
//	bits 63..32 STag   bit 31 windows bound   bits 30..24 State
//	bits 23..0 reference count
//
// The windows-bound bit is in the word so that binding a window and
// invalidating its region decide against each other with one CAS each.
const (
	refBits    = 24
	maxRefs    = 1<<refBits - 1
	stateShift = 24
	stagShift  = 32
	stateMask  = 0x7f
	boundBit   = 0x80 << stateShift
)

func pack(s STag, st State, refs uint32) uint64 {
	return uint64(s)<<stagShift | uint64(st)<<stateShift | uint64(refs)
}

func wordSTag(w uint64) STag   { return STag(w >> stagShift) }
func wordState(w uint64) State { return State(w>>stateShift) & stateMask }
func wordRefs(w uint64) uint32 { return uint32(w) & maxRefs }
func withState(w uint64, st State) uint64 {
	return w&^(stateMask<<stateShift) | uint64(st)<<stateShift
}

// Region is a registered buffer. Its buffer, base, rights and PD never
// change; its STag changes only through Revalidate.
//
// The fields a lookup reads come first, so that they share the object's
// first 64 bytes.
type Region struct {
	word  atomic.Uint64
	index uint32
	// remote counts remote accesses in progress: placements of a peer's
	// segment and Read Responses being sent (LookupRemote, ReleaseRemote).
	remote      atomic.Int32
	pd          *PD
	access      Access
	kind        Kind
	noRemoteInv bool
	base        uint64
	buf         []byte
	attachment  any

	// Memory windows (window.go). A binding's owner is the stream a
	// type 2 window is tied to (nil: any stream of the PD); parent is the
	// region it is bound to. windows counts a region's bound windows,
	// under Table.mu.
	owner   any
	parent  *Region
	mwType  WindowType
	windows int
}

// STag returns the region's current STag.
func (r *Region) STag() STag { return wordSTag(r.word.Load()) }

// State returns the region's current state.
func (r *Region) State() State { return wordState(r.word.Load()) }

// Refs returns the number of references held by local work.
func (r *Region) Refs() int { return int(wordRefs(r.word.Load())) }

// RemoteUses returns the number of remote accesses in progress: references
// taken by LookupRemote and not yet released.
func (r *Region) RemoteUses() int { return int(r.remote.Load()) }

// ReleaseRemote ends a remote access begun by LookupRemote.
func (r *Region) ReleaseRemote() {
	if r.remote.Add(-1) < 0 {
		panic("stag: ReleaseRemote without LookupRemote")
	}
}

// Attachment returns the value given to RegisterAttached, or nil.
func (r *Region) Attachment() any { return r.attachment }

// PD returns the protection domain the region belongs to.
func (r *Region) PD() *PD { return r.pd }

// Access returns the rights the region was registered with.
func (r *Region) Access() Access { return r.access }

// Kind returns what the STag names.
func (r *Region) Kind() Kind { return r.kind }

// Base returns the TO of the region's first byte.
func (r *Region) Base() uint64 { return r.base }

// Len returns the region's length in bytes.
func (r *Region) Len() int { return len(r.buf) }

// Bytes returns the registered buffer.
func (r *Region) Bytes() []byte { return r.buf }

// TO returns the tagged offset a peer uses to address byte off of the region.
func (r *Region) TO(off uint64) uint64 { return r.base + off }

// AllowsRemoteInvalidate reports whether a peer's Send with Invalidate may
// invalidate the region (false if registered with NoRemoteInvalidate).
func (r *Region) AllowsRemoteInvalidate() bool { return !r.noRemoteInv }

// String describes the region for logs.
func (r *Region) String() string {
	w := r.word.Load()
	return fmt.Sprintf("%v %v pd=%d base=0x%x len=%d %v %v refs=%d",
		r.kind, wordSTag(w), r.pd.id, r.base, len(r.buf), r.access, wordState(w), wordRefs(w))
}

// Acquire takes a reference on behalf of local work (a posted work request
// naming the region). While references are held Deregister fails with
// ErrBusy. Acquire fails with ErrDeregistered once the region is freed; it
// succeeds on an invalidated region, whose memory is still registered.
func (r *Region) Acquire() error {
	for {
		w := r.word.Load()
		switch {
		case wordState(w) == StateFree:
			return ErrDeregistered
		case wordRefs(w) == maxRefs:
			return ErrTooManyRefs
		}
		if r.word.CompareAndSwap(w, w+1) {
			return nil
		}
	}
}

// Release drops a reference taken by Acquire. Releasing more than was
// acquired is a bug in the caller and panics, like a negative WaitGroup.
func (r *Region) Release() {
	for {
		w := r.word.Load()
		if wordRefs(w) == 0 {
			panic("stag: Release without Acquire")
		}
		if r.word.CompareAndSwap(w, w-1) {
			return
		}
	}
}

// Invalidate invalidates the region locally: accesses through its STag fail
// with Invalidated from now on (accesses already under way keep their
// LookupRemote reference until they release it). Invalidating an invalid region is allowed and
// changes nothing (verbs semantics). It fails only on a freed region.
//
// A region that memory windows are bound to cannot be invalidated
// (ErrWindowsBound), as in verbs; invalidating a window's binding unbinds it.
func (r *Region) Invalidate() error {
	if r.kind == KindMemoryWindow {
		t := r.pd.t
		t.mu.Lock()
		t.unbind(r)
		t.mu.Unlock()
		return nil
	}
	for {
		w := r.word.Load()
		switch wordState(w) {
		case StateFree:
			return ErrDeregistered
		case StateInvalid:
			return nil
		}
		if w&boundBit != 0 {
			return ErrWindowsBound
		}
		if r.word.CompareAndSwap(w, withState(w, StateInvalid)) {
			return nil
		}
	}
}

// Revalidate makes an invalidated region valid again under a fresh STag: same
// index, a new random key that differs from the previous one and from the
// table's last retired STags, so the STag that was invalidated stays
// unusable. It returns the new STag.
func (r *Region) Revalidate() (STag, error) {
	if r.kind == KindMemoryWindow {
		return 0, ErrIsWindow
	}
	t := r.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	switch wordState(r.word.Load()) {
	case StateFree:
		return 0, ErrDeregistered
	case StateValid:
		return 0, ErrNotInvalid
	}
	old := r.STag()
	s := MakeSTag(r.index, t.pickKey(r.index, int(old.Key())))
	for {
		w := r.word.Load()
		// Only Acquire and Release can race with us here: invalidation
		// leaves an invalid region alone and every other transition out of
		// the invalid state holds t.mu.
		if r.word.CompareAndSwap(w, pack(s, StateValid, wordRefs(w))) {
			break
		}
	}
	t.retire(old)
	t.noteIssued(s)
	return s, nil
}

// Deregister frees the region's STag. It fails with ErrBusy while local work
// holds references and with ErrDeregistered if already freed. New lookups
// fail at once; a remote access that passed LookupRemote before keeps its
// reference until it releases it, which RemoteUses reports: the caller that
// must know the memory is no longer touched (package conn) waits for it.
// While memory windows are bound to the region it fails with
// ErrWindowsBound, which wraps ErrBusy (verbs' EBUSY from ibv_dereg_mr).
func (r *Region) Deregister() error {
	if r.kind == KindMemoryWindow {
		return ErrIsWindow
	}
	t := r.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		w := r.word.Load()
		switch {
		case wordState(w) == StateFree:
			return ErrDeregistered
		case wordRefs(w) != 0:
			return ErrBusy
		case w&boundBit != 0:
			return errWindowsBusy
		}
		if r.word.CompareAndSwap(w, withState(w, StateFree)) {
			t.unpublish(r)
			t.retire(wordSTag(w))
			return nil
		}
	}
}
