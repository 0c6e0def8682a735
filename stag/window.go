package stag

import "fmt"

// WindowType is the type of a memory window, as in verbs.
type WindowType uint8

// Window types.
const (
	// WindowType1 windows are bound and unbound by their owner only
	// (Window.Bind, a zero-length Bind, Window.Invalidate), get a new
	// random key at every bind, and may be used from every stream of the
	// PD. Peers cannot invalidate them.
	WindowType1 WindowType = 1
	// WindowType2 windows are bound through one stream, take the key the
	// owner chooses at bind (verbs' rkey update), may be used from that
	// stream only, and are invalidated locally or by that stream's
	// peer with a Send with Invalidate. A bound type 2 window must be
	// invalidated before it is bound again.
	WindowType2 WindowType = 2
)

// String names the type.
func (t WindowType) String() string {
	switch t {
	case WindowType1:
		return "type 1"
	case WindowType2:
		return "type 2"
	}
	return fmt.Sprintf("WindowType(%d)", uint8(t))
}

// errWindowsBusy is what Deregister reports for a region with windows bound:
// both the general "busy" and the specific reason.
var errWindowsBusy = fmt.Errorf("%w: %w", ErrBusy, ErrWindowsBound)

// Window is a memory window: an STag index of the table reserved until Free,
// which names, while bound, a sub-range of a registered region with a subset
// of its remote rights.
//
// Each bind publishes a new binding at the window's index: a Region of kind
// KindMemoryWindow whose buffer, base, rights and stream never change, so
// lookups read a binding with no lock exactly as they read a region. A
// binding that is replaced (a type 1 rebind) is freed first, and one that is
// invalidated stays in place in the invalid state until the next bind, so
// every STag a window ever had fails once it no longer names the binding.
//
// All methods are safe for concurrent use; binding and invalidation hold
// the table's lock.
type Window struct {
	pd  *PD
	typ WindowType
	// cur is the binding published at the window's index (invalid while
	// unbound); freed is set by Free. Both under Table.mu.
	cur   *Region
	freed bool
}

// BindSpec is what a window is bound to.
type BindSpec struct {
	// Region is the registered region, of the window's PD, registered with
	// MWBind.
	Region *Region
	// Offset and Length select the bytes [Offset, Offset+Length) of the
	// region. Length 0 unbinds a type 1 window (verbs semantics) and is
	// refused for a type 2 window.
	Offset, Length uint64
	// Access is the rights the window grants: a non-empty subset of
	// RemoteRead, RemoteWrite and RemoteAtomic that the region grants too.
	// A window is never a local key.
	Access Access
	// ZeroBased makes TO 0 address the window's first byte; otherwise the
	// window is addressed by the region's own tagged offsets
	// (Region.TO(Offset) is its first byte), which is what VA-based verbs
	// programs expect.
	ZeroBased bool
	// Key is the key part of the STag after the bind of a type 2 window
	// (verbs' ibv_inc_rkey is the usual choice); it must differ from the
	// window's current key, so that the STag of the previous binding stays
	// unusable. Type 1 windows get a random key and ignore it.
	Key uint8
	// QP is the stream a type 2 window is tied to: lookups from any other
	// (LookupRemoteFrom, RemoteInvalidateFrom, InvalidateFrom) fail with
	// QPMismatch. It must be non-nil and comparable (package conn passes
	// its *QP). Type 1 windows ignore it.
	QP any
}

// AllocWindow reserves a memory window of type typ in the PD (verbs'
// ibv_alloc_mw). Its STag names nothing until it is bound: a peer using it
// finds an invalid STag. A window counts against the table's maximum of
// regions.
func (pd *PD) AllocWindow(typ WindowType) (*Window, error) {
	if typ != WindowType1 && typ != WindowType2 {
		return nil, fmt.Errorf("%w: memory window %v", ErrBadOption, typ)
	}
	t := pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count >= t.max {
		return nil, ErrTableFull
	}
	idx := t.allocIndex()
	s := MakeSTag(idx, t.pickKey(idx, -1))
	b := &Region{pd: pd, index: idx, kind: KindMemoryWindow, mwType: typ}
	b.word.Store(pack(s, StateInvalid, 0))
	t.publish(b)
	t.noteIssued(s)
	return &Window{pd: pd, typ: typ, cur: b}, nil
}

// PD returns the window's protection domain.
func (w *Window) PD() *PD { return w.pd }

// Type returns the window's type.
func (w *Window) Type() WindowType { return w.typ }

// Binding returns the window's current binding (a Region of kind
// KindMemoryWindow: its STag, state, bytes, base and rights), invalid while
// the window is not bound.
func (w *Window) Binding() *Region {
	t := w.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return w.cur
}

// STag returns the window's current STag.
func (w *Window) STag() STag { return w.Binding().STag() }

// Bound reports whether the window is bound.
func (w *Window) Bound() bool { return w.Binding().State() == StateValid }

// Bind binds the window as spec says and returns its new binding. prev is
// the binding it replaced if that one was still valid (a type 1 rebind or
// a type 1 zero-length unbind): new lookups of prev's STag fail at once, and
// the caller that must know no peer touches its bytes any more waits for
// prev.RemoteUses to drop, as after an invalidation. A zero-length bind of
// a type 1 window returns the window's invalid binding.
//
// Bind fails, changing nothing, with ErrDeregistered after Free,
// ErrWindowBound for a bound type 2 window, and ErrBadBind for a spec the
// rules on BindSpec refuse or a region that is not valid.
func (w *Window) Bind(spec BindSpec) (cur, prev *Region, err error) {
	t := w.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.freed {
		return nil, nil, ErrDeregistered
	}
	old := w.cur
	oldValid := old.State() == StateValid
	if w.typ == WindowType1 && spec.Length == 0 {
		if t.unbind(old) {
			return old, old, nil
		}
		return old, nil, nil
	}
	if w.typ == WindowType2 && oldValid {
		return nil, nil, ErrWindowBound
	}
	p := spec.Region
	if err := w.check(spec); err != nil {
		return nil, nil, err
	}
	key := spec.Key
	var owner any
	if w.typ == WindowType1 {
		key = t.pickKey(old.index, int(old.STag().Key()))
	} else {
		owner = spec.QP
	}
	base := p.base + spec.Offset
	if spec.ZeroBased {
		base = 0
	}
	end := spec.Offset + spec.Length
	b := &Region{
		pd:          w.pd,
		index:       old.index,
		buf:         p.buf[spec.Offset:end:end],
		base:        base,
		access:      spec.Access,
		kind:        KindMemoryWindow,
		noRemoteInv: w.typ == WindowType1,
		attachment:  p.attachment,
		owner:       owner,
		parent:      p,
		mwType:      w.typ,
	}
	s := MakeSTag(old.index, key)
	b.word.Store(pack(s, StateValid, 0))
	// The region must be valid and stay so: setting its windows-bound
	// bit is one CAS against which its invalidation decides.
	if !markBound(p) {
		return nil, nil, fmt.Errorf("%w: region %v is not valid", ErrBadBind, p.STag())
	}
	if oldValid {
		t.unbind(old)
		prev = old
	}
	// The old binding is never valid again: freed, a lookup that still
	// holds it fails like one of a deregistered region.
	for {
		x := old.word.Load()
		if old.word.CompareAndSwap(x, withState(x, StateFree)) {
			break
		}
	}
	t.replace(old, b)
	t.retire(old.STag())
	t.noteIssued(s)
	w.cur = b
	return b, prev, nil
}

// check applies the bind rules of BindSpec, except the region's state.
// Called with t.mu held.
func (w *Window) check(spec BindSpec) error {
	p := spec.Region
	switch {
	case p == nil || p.kind != KindMemoryRegion:
		return fmt.Errorf("%w: no region", ErrBadBind)
	case p.pd != w.pd:
		return fmt.Errorf("%w: region of another PD", ErrBadBind)
	case !p.access.Has(MWBind):
		return fmt.Errorf("%w: region registered without MWBind", ErrBadBind)
	case spec.Access == 0 || spec.Access&^remoteAccess != 0:
		return fmt.Errorf("%w: window rights %v: want remote rights only", ErrBadBind, spec.Access)
	case !p.access.Has(spec.Access):
		return fmt.Errorf("%w: window rights %v exceed the region's %v", ErrBadBind, spec.Access, p.access)
	case spec.Length == 0:
		return fmt.Errorf("%w: zero-length type 2 bind", ErrBadBind)
	case !within(spec.Offset, spec.Length, uint64(len(p.buf))):
		return fmt.Errorf("%w: [%d, +%d) outside the %d-byte region", ErrBadBind, spec.Offset, spec.Length, len(p.buf))
	case w.typ == WindowType2 && spec.QP == nil:
		return fmt.Errorf("%w: type 2 bind without a stream", ErrBadBind)
	case w.typ == WindowType2 && spec.Key == w.cur.STag().Key():
		return fmt.Errorf("%w: key 0x%02x is the window's current key", ErrBadBind, spec.Key)
	}
	return nil
}

// Invalidate unbinds the window locally, whatever its type (the owner's
// verb; peers and send-queue invalidations follow the rules of
// RemoteInvalidateFrom and InvalidateFrom). It returns the binding that was
// valid, or nil if the window was not bound; like Region.Invalidate, new
// lookups fail at once and accesses under way keep their reference
// (prev.RemoteUses) until they release it.
func (w *Window) Invalidate() (prev *Region) {
	t := w.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unbind(w.cur) {
		return w.cur
	}
	return nil
}

// Free releases the window's index (verbs' ibv_dealloc_mw), unbinding it
// first; it returns the binding that was valid, or nil. Calls after the
// first return ErrDeregistered.
func (w *Window) Free() (prev *Region, err error) {
	t := w.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.freed {
		return nil, ErrDeregistered
	}
	w.freed = true
	b := w.cur
	if t.unbind(b) {
		prev = b
	}
	for {
		x := b.word.Load()
		if b.word.CompareAndSwap(x, withState(x, StateFree)) {
			break
		}
	}
	t.unpublish(b)
	t.retire(b.STag())
	return prev, nil
}

// Parent returns the region a window binding is bound to, nil for a region.
func (r *Region) Parent() *Region { return r.parent }

// WindowType returns the type of the window a binding belongs to, 0 for a
// region.
func (r *Region) WindowType() WindowType { return r.mwType }

// Windows returns the number of memory windows bound to the region.
func (r *Region) Windows() int {
	t := r.pd.t
	t.mu.Lock()
	defer t.mu.Unlock()
	return r.windows
}

// markBound counts one more window bound to p and sets its windows-bound
// bit, if p is valid. Called with t.mu held.
func markBound(p *Region) bool {
	for {
		w := p.word.Load()
		if wordState(w) != StateValid {
			return false
		}
		if p.word.CompareAndSwap(w, w|boundBit) {
			p.windows++
			return true
		}
	}
}

// unbind makes binding b invalid if it is valid and uncounts it from its
// region, clearing the region's windows-bound bit with the last one. It
// reports whether b was valid. Called with t.mu held.
func (t *Table) unbind(b *Region) bool {
	for {
		w := b.word.Load()
		if wordState(w) != StateValid {
			return false
		}
		if b.word.CompareAndSwap(w, withState(w, StateInvalid)) {
			break
		}
	}
	p := b.parent
	if p.windows--; p.windows == 0 {
		for {
			w := p.word.Load()
			if p.word.CompareAndSwap(w, w&^boundBit) {
				break
			}
		}
	}
	return true
}

// invalidateWindow carries out an invalidation of window binding b asked for
// on stream qp, by a peer (remote) or by a local work request. Verbs and the
// InfiniBand rules siw follows: a type 1 window cannot be invalidated this
// way, a type 2 window only from its stream.
func (t *Table) invalidateWindow(b *Region, qp any, remote bool) Failure {
	if b.mwType != WindowType2 {
		return CannotInvalidate
	}
	if b.owner != nil && b.owner != qp {
		return QPMismatch
	}
	t.mu.Lock()
	ok := t.unbind(b)
	t.mu.Unlock()
	if !ok && remote {
		return CannotInvalidate
	}
	return OK
}

// replace puts binding b in the slot of binding old, at the same index.
// Lookups see one or the other, each with its own state word. Called with
// t.mu held.
func (t *Table) replace(old, b *Region) {
	a := t.slots.Load()
	mask := uint32(len(a.slots) - 1)
	for i := old.index; ; i++ {
		switch a.slots[i&mask].Load() {
		case old:
			a.slots[i&mask].Store(b)
			return
		case nil:
			panic("stag: memory window missing from its table")
		}
	}
}
