package stag

import (
	"fmt"
	"math"
	"sync/atomic"
)

// PD is a protection domain. A stream (queue pair) belongs to one PD, and it
// may only use regions of that PD.
type PD struct {
	t  *Table
	id uint32

	// streams counts the streams (connected queue pairs) using the PD, as
	// its owner reports them through AddStream: with more than one, every
	// region of the PD is shared on multiple streams (RFC 5040 §8.1.1
	// item 7).
	streams atomic.Int32
}

// AddStream records that a stream started (delta 1) or ended (delta -1)
// using the PD. While more than one stream uses it, RemoteInvalidateFrom
// refuses to invalidate its memory regions (SharedStreams).
func (pd *PD) AddStream(delta int) { pd.streams.Add(int32(delta)) }

// Streams returns the number of streams AddStream has recorded.
func (pd *PD) Streams() int { return int(pd.streams.Load()) }

// Table returns the table the PD was created from.
func (pd *PD) Table() *Table { return pd.t }

// ID returns a number that identifies the PD within its table.
func (pd *PD) ID() uint32 { return pd.id }

// String describes the PD for logs.
func (pd *PD) String() string { return fmt.Sprintf("PD(%d)", pd.id) }

// RegisterOption adjusts one registration. Options are flags and may be
// combined with |.
type RegisterOption uint8

// Registration options.
const (
	// NoRemoteInvalidate makes the region immune to a peer's Send with
	// Invalidate (it fails with CannotInvalidate); local invalidation
	// still works.
	NoRemoteInvalidate RegisterOption = 1 << iota
)

// Register registers buf with the given rights and base TO, and returns the
// region with a fresh STag: an index drawn uniformly from the table's free
// indices and a random key, so that a peer cannot derive a valid STag from
// the ones it has seen (docs/rfc-notes/stag.md gives the expected number of
// guesses). None of the table's last 128 retired STags (deregistered, or
// replaced by Revalidate) is handed out again.
//
// Every peer of a PD can reach every region of that PD by guessing its STag,
// so give each untrusted peer its own PD (the RFC 5042 model): a guess that
// lands on another PD's region fails with PDMismatch and touches nothing.
func (pd *PD) Register(buf []byte, access Access, base Base, opts ...RegisterOption) (*Region, error) {
	return pd.RegisterAttached(buf, access, base, nil, opts...)
}

// RegisterAttached is Register with a value that the region carries for its
// owner (Region.Attachment): the connection engine keeps its per-region
// hooks there, so that a lookup yields them with no second table.
func (pd *PD) RegisterAttached(buf []byte, access Access, base Base, attachment any, opts ...RegisterOption) (*Region, error) {
	if err := access.Validate(); err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return nil, ErrEmptyRegion
	}
	b := base.resolve(buf)
	// The region's TOs [b, b+len) must not wrap, so that every TO inside it
	// plus the remaining length is representable.
	if b > math.MaxUint64-uint64(len(buf)) {
		return nil, ErrBaseOverflow
	}
	var o RegisterOption
	for _, x := range opts {
		o |= x
	}
	t := pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count >= t.max {
		return nil, ErrTableFull
	}
	idx := t.allocIndex()
	s := MakeSTag(idx, t.pickKey(idx, -1))
	r := &Region{
		pd:          pd,
		buf:         buf,
		base:        b,
		index:       idx,
		access:      access,
		kind:        KindMemoryRegion,
		noRemoteInv: o&NoRemoteInvalidate != 0,
		attachment:  attachment,
	}
	r.word.Store(pack(s, StateValid, 0))
	t.publish(r)
	t.noteIssued(s)
	return r, nil
}

// Lookup validates a remote access through STag s at tagged offset to for
// length bytes, needing the rights need, on a stream of this PD. On success it
// returns exactly the registered bytes [to−base, to−base+length) (capacity
// equal to length) and OK; otherwise nil and the first failed rule in this
// order: STag (InvalidSTag, Invalidated), stream (PDMismatch), rights
// (AccessRights), offsets (TOWrap, then BaseBounds).
//
// A zero-length access is checked like any other: it is valid at any TO from
// base to base+len inclusive (the end of the region), and one past that is a
// bounds violation.
//
// Lookup takes no lock and does not allocate.
//
// A type 2 memory window is tied to the stream that bound it, which Lookup
// does not know: an access through one fails with QPMismatch (use
// LookupRemoteFrom).
func (pd *PD) Lookup(s STag, to, length uint64, need Access) ([]byte, Failure) {
	_, b, f := pd.lookup(s, to, length, need, nil)
	return b, f
}

func (pd *PD) lookup(s STag, to, length uint64, need Access, qp any) (*Region, []byte, Failure) {
	// Table.find, written out so that it also stops at the index's region
	// when only the key is wrong, instead of probing on to a nil slot: this
	// is the receive path's lookup, once per tagged segment. One load gives
	// STag and state
	// together; the full 32 bits must match, so a stale slot array or a
	// reused index cannot hand out another region.
	slots := pd.t.slots.Load().slots
	if len(slots) == 0 {
		return nil, nil, InvalidSTag // never: lets the compiler drop the bounds checks
	}
	var r *Region
	var w uint64
	for i := uint(s.Index()); ; i++ {
		if r = slots[i&uint(len(slots)-1)].Load(); r == nil {
			return nil, nil, InvalidSTag
		}
		if w = r.word.Load(); wordSTag(w) == s {
			break
		}
		if wordSTag(w)>>KeyBits == s>>KeyBits { // the index's region, another key
			return nil, nil, InvalidSTag
		}
	}
	switch wordState(w) {
	case StateValid:
	case StateInvalid:
		return nil, nil, Invalidated
	default:
		return nil, nil, InvalidSTag
	}
	if r.pd != pd {
		return nil, nil, PDMismatch
	}
	// A type 2 window is usable on the one stream it was bound through
	// (RFC 5040 §8.1.1 item 2: "if an STag is limited in scope to a single
	// Stream, no other Stream can use the STag"; RFC 5041 §8.2).
	if r.owner != nil && r.owner != qp {
		return nil, nil, QPMismatch
	}
	if !r.access.Has(need) {
		return nil, nil, AccessRights
	}
	// The tagged segment MUST be validated before Placement (RFC 5041
	// §7.1, DDP draft §9.1): TO and TO+length inside the region. The wrap
	// is tested first so that TO+length below is never computed modulo 2^64.
	if to > math.MaxUint64-length {
		return nil, nil, TOWrap
	}
	if to < r.base {
		return nil, nil, BaseBounds
	}
	off := to - r.base
	if !within(off, length, uint64(len(r.buf))) {
		return nil, nil, BaseBounds
	}
	// Capacity = length: the caller cannot append or reslice past the range.
	return r, r.buf[off : off+length : off+length], OK
}

// Find returns the region registered at s in this PD's table, whatever its
// state or PD, or nil if s names none (unknown index, wrong key, freed).
// It takes no lock.
func (pd *PD) Find(s STag) *Region {
	r := pd.t.load(s.Index())
	if r == nil || wordSTag(r.word.Load()) != s || r.State() == StateFree {
		return nil
	}
	return r
}

// LookupRemote is Lookup for an access the caller is about to carry out
// (placing a segment's payload, sending a Read Response): on success it
// also returns the region with a remote reference taken, which the caller
// drops with ReleaseRemote once it no longer touches the bytes. The
// reference is taken before the region's state is checked a second time,
// so a Deregister or Invalidate that changed the state either makes this
// lookup fail or finds the reference (Region.RemoteUses) and can wait for
// it: nothing is placed into memory whose invalidation has returned.
//
// LookupRemote takes no lock and does not allocate.
func (pd *PD) LookupRemote(s STag, to, length uint64, need Access) (*Region, []byte, Failure) {
	return pd.LookupRemoteFrom(s, to, length, need, nil)
}

// LookupRemoteFrom is LookupRemote for an access that arrived on stream qp
// (package conn passes its *QP): a type 2 memory window bound through
// another stream fails with QPMismatch, checked after the PD and before
// the rights. qp must be nil or a comparable value such as a pointer.
//
// LookupRemoteFrom takes no lock and does not allocate.
func (pd *PD) LookupRemoteFrom(s STag, to, length uint64, need Access, qp any) (*Region, []byte, Failure) {
	r, b, f := pd.lookup(s, to, length, need, qp)
	if f != OK {
		return nil, nil, f
	}
	r.remote.Add(1)
	w := r.word.Load()
	if wordSTag(w) != s || wordState(w) != StateValid {
		r.remote.Add(-1)
		if wordSTag(w) == s && wordState(w) == StateInvalid {
			return nil, nil, Invalidated
		}
		return nil, nil, InvalidSTag
	}
	return r, b, OK
}

// CheckLocal validates a local scatter/gather entry at post time: region r
// used by a work request of this PD, bytes [off, off+length) of the buffer,
// needing the local rights need. It returns those bytes or the failure
// (InvalidSTag for a freed region, Invalidated, PDMismatch, AccessRights,
// BaseBounds; an off+length that overflows is a bounds violation, since no
// TO is involved). Failures here are local protection errors, not wire codes.
// r must be a region returned by Register (not nil).
func (pd *PD) CheckLocal(r *Region, off, length uint64, need Access) ([]byte, Failure) {
	switch wordState(r.word.Load()) {
	case StateValid:
	case StateInvalid:
		return nil, Invalidated
	default:
		return nil, InvalidSTag
	}
	if r.pd != pd {
		return nil, PDMismatch
	}
	if !r.access.Has(need) {
		return nil, AccessRights
	}
	if !within(off, length, uint64(len(r.buf))) {
		return nil, BaseBounds
	}
	return r.buf[off : off+length : off+length], OK
}

// within reports whether [off, off+n) lies in [0, size) without computing
// off+n, which may overflow.
func within(off, n, size uint64) bool { return off <= size && n <= size-off }

// Invalidate carries out a local invalidate work request naming s on a
// stream of this PD. An unknown or freed STag or a wrong key gives
// InvalidSTag, a region of another PD gives PDMismatch. Invalidating an
// already invalid region succeeds (verbs semantics, as siw). A region
// with windows bound gives BoundWindows; a memory window is handled as
// InvalidateFrom with no stream.
func (pd *PD) Invalidate(s STag) Failure { return pd.InvalidateFrom(s, nil) }

// InvalidateFrom is Invalidate for a work request posted on stream qp. For
// a memory window it follows verbs' IBV_WR_LOCAL_INV: only a type 2 window
// may be invalidated this way (a type 1 window gives CannotInvalidate), and
// only through the stream it was bound through (else QPMismatch).
func (pd *PD) InvalidateFrom(s STag, qp any) Failure {
	r, w := pd.t.find(s)
	for {
		if wordSTag(w) != s || wordState(w) == StateFree {
			return InvalidSTag
		}
		if r.pd != pd {
			return PDMismatch
		}
		if r.kind == KindMemoryWindow {
			return pd.t.invalidateWindow(r, qp, false)
		}
		if wordState(w) == StateInvalid {
			return OK
		}
		if w&boundBit != 0 {
			return BoundWindows
		}
		if r.word.CompareAndSwap(w, withState(w, StateInvalid)) {
			return OK
		}
		w = r.word.Load()
	}
}

// RemoteInvalidate carries out the invalidation requested by a peer's Send
// with Invalidate (or Send with Solicited Event and Invalidate) received on a
// stream of this PD. Rules, checked in this order:
//
//   - the STag must name a registered region: index known, key equal, not
//     deregistered — else CannotInvalidate (RDMAP 0/2/0x09);
//   - the region must belong to this PD — else CannotInvalidatePD
//     (RDMAP 0/1/0x09, as siw, irdma, cxgb4 and nes send it);
//   - the region must be valid — else CannotInvalidate;
//   - the region must not be registered with NoRemoteInvalidate — else
//     CannotInvalidate (cxgb4 also answers 0/2/0x09 for regions it will not
//     invalidate remotely);
//   - the region must not be shared on multiple streams: while AddStream
//     counts more than one stream on the PD, SharedStreams (RFC 5040
//     §8.1.1 item 7: "An RNIC MUST ensure that a Remote Peer is not able
//     to invalidate an STag enabled for remote access, if the STag is
//     shared on multiple streams"; RFC 5042 §6.4.5).
//
// siw is more lenient: it does not compare the key and lets an invalid STag
// be invalidated again. The stricter rules cost nothing toward a correct peer.
//
// A region with memory windows bound gives CannotInvalidate. A window's
// STag is handled as RemoteInvalidateFrom with no stream.
func (pd *PD) RemoteInvalidate(s STag) Failure { return pd.RemoteInvalidateFrom(s, nil) }

// RemoteInvalidateFrom is RemoteInvalidate for a Send with Invalidate that
// arrived on stream qp. A memory window's STag follows verbs: a type 1
// window cannot be invalidated by a peer (CannotInvalidate); a type 2
// window only by a message on the stream it was bound through (else
// QPMismatch, which is sent as 0/1/0x09 like CannotInvalidatePD), and only
// while bound (else CannotInvalidate).
func (pd *PD) RemoteInvalidateFrom(s STag, qp any) Failure {
	r, w := pd.t.find(s)
	for {
		if wordSTag(w) != s || wordState(w) == StateFree {
			return CannotInvalidate
		}
		if r.pd != pd {
			return CannotInvalidatePD
		}
		if r.kind == KindMemoryWindow {
			return pd.t.invalidateWindow(r, qp, true)
		}
		if wordState(w) != StateValid || r.noRemoteInv || w&boundBit != 0 {
			return CannotInvalidate
		}
		// RFC 5040 §8.1.1 item 7: MUST NOT invalidate an STag shared on
		// multiple streams. Every region of a PD is valid on each of its
		// streams, so the PD's stream count decides.
		if pd.streams.Load() > 1 {
			return SharedStreams
		}
		if r.word.CompareAndSwap(w, withState(w, StateInvalid)) {
			return OK
		}
		w = r.word.Load()
	}
}
