package conn

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/stag"
)

// MWBind lets memory windows be bound to a region (verbs'
// IBV_ACCESS_MW_BIND). A region registered without it can never be reached
// through a window: granting remote rights through windows is a right of
// its own, so that a region registered for local use only stays so.
const MWBind = stag.MWBind

// MWType is the type of a memory window, as in verbs.
type MWType = stag.WindowType

// Memory window types (docs/rfc-notes/rfc5040.md, "Memory windows").
const (
	// MWType1 windows are bound by the synchronous verb MW.Bind, get a new
	// random STag key at every bind, may be used by the peers of every
	// queue pair of the PD, and only their owner unbinds them (a
	// zero-length MW.Bind, MW.Invalidate): peers cannot invalidate them,
	// nor can OpLocalInv.
	MWType1 = stag.WindowType1
	// MWType2 windows are bound by an OpBindMW work request, take the STag
	// key the program chooses (BindInfo.Key, verbs' rkey update), and are
	// tied to the queue pair that bound them: a peer's access through
	// any other queue pair ends that connection with a Terminate ("STag
	// not associated"). They are invalidated by OpLocalInv on that queue
	// pair, by its peer's Send with Invalidate, or by MW.Invalidate, and
	// must be invalidated before they are bound again.
	MWType2 = stag.WindowType2
)

// ErrWindowsBound is returned by MR.Invalidate while memory windows are
// bound to the region; MR.Deregister then fails with an error that is both
// ErrMRBusy and ErrWindowsBound (verbs' EBUSY from ibv_dereg_mr).
var ErrWindowsBound = stag.ErrWindowsBound

// BindInfo says what a memory window is bound to (verbs' ibv_mw_bind_info).
type BindInfo struct {
	// MR is the region, of the window's PD, registered with MWBind and
	// without WithHooks.
	MR *MR
	// Offset and Length select the region's bytes [Offset, Offset+Length).
	// Length 0 unbinds a type 1 window; a type 2 window needs at least one
	// byte.
	Offset, Length int
	// Access is what the window grants peers: a non-empty subset of
	// RemoteRead, RemoteWrite and RemoteAtomic that the region grants too.
	Access Access
	// ZeroBased makes tagged offset 0 address the window's first byte;
	// otherwise peers address it with the region's own tagged offsets
	// (MR.Remote(Offset) is its first byte).
	ZeroBased bool
	// Key is the key part (low 8 bits) of a type 2 window's STag after the
	// bind; it must differ from the current one (MW.STag). Type 1 windows
	// ignore it.
	Key uint8
}

// MW is a memory window: an STag that names, while bound, a range of a
// registered region with a subset of its remote rights, and that can be
// bound, invalidated and rebound without registering memory again.
type MW struct {
	pd *PD
	w  *stag.Window
}

// AllocMW allocates a memory window of type typ (verbs' ibv_alloc_mw). It
// is not bound: its STag names nothing until MW.Bind or OpBindMW.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	w, err := pd.pd.AllocWindow(typ)
	if err != nil {
		return nil, fmt.Errorf("iwarp: alloc mw: %w", err)
	}
	return &MW{pd: pd, w: w}, nil
}

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.w.Type() }

// PD returns the window's protection domain.
func (mw *MW) PD() *PD { return mw.pd }

// STag returns the window's current STag (its rkey).
func (mw *MW) STag() STag { return mw.w.STag() }

// Bound reports whether the window is bound.
func (mw *MW) Bound() bool { return mw.w.Bound() }

// Len returns the length of the window's current binding, 0 if unbound.
func (mw *MW) Len() int {
	b := mw.w.Binding()
	if b.State() != stag.StateValid {
		return 0
	}
	return b.Len()
}

// Remote returns the address a peer uses for byte off of the window's
// current binding.
func (mw *MW) Remote(off int) RemoteAddr {
	b := mw.w.Binding()
	return RemoteAddr{STag: b.STag(), TO: b.TO(uint64(off))}
}

// Bind binds a type 1 window (verbs' ibv_bind_mw) and returns its new STag;
// binding a bound type 1 window moves it. A zero Length unbinds it and
// returns STag 0. The
// STag it had before is dead once Bind returns: a peer's access through it
// that was under way ends its connection with a Terminate, as for
// MR.Invalidate, and after Bind returns no peer reads or writes a byte
// through the old binding. Type 2 windows are bound with OpBindMW.
func (mw *MW) Bind(info BindInfo) (STag, error) {
	if mw.w.Type() != MWType1 {
		return 0, fmt.Errorf("%w: MW.Bind binds type 1 windows; post OpBindMW for a %v window", ErrInvalidWR, mw.w.Type())
	}
	spec, err := mw.spec(info, nil)
	if err != nil {
		return 0, err
	}
	cur, prev, err := mw.w.Bind(spec)
	if err != nil {
		return 0, fmt.Errorf("iwarp: bind mw: %w", err)
	}
	if prev != nil {
		revokeRemote(mw.pd, prev)
	}
	if info.Length == 0 {
		return 0, nil // unbound: the window's STag names nothing
	}
	return cur.STag(), nil
}

// Invalidate unbinds the window, whatever its type: peers can no longer
// use its STag. Like MR.Invalidate it never waits on the network, and
// after it returns no peer reads or writes a byte through the window.
func (mw *MW) Invalidate() error {
	if prev := mw.w.Invalidate(); prev != nil {
		revokeRemote(mw.pd, prev)
	}
	return nil
}

// Free unbinds the window and releases its STag (verbs' ibv_dealloc_mw).
// Calls after the first fail.
func (mw *MW) Free() error {
	prev, err := mw.w.Free()
	if err != nil {
		return fmt.Errorf("iwarp: free mw: %w", err)
	}
	if prev != nil {
		revokeRemote(mw.pd, prev)
	}
	return nil
}

// spec turns info into the stag package's bind, for queue pair qp (type
// 2).
func (mw *MW) spec(info BindInfo, qp *QP) (stag.BindSpec, error) {
	s := stag.BindSpec{Access: info.Access, ZeroBased: info.ZeroBased, Key: info.Key}
	if info.Offset < 0 || info.Length < 0 {
		return s, fmt.Errorf("%w: memory window bind with a negative offset or length", ErrInvalidWR)
	}
	s.Offset, s.Length = uint64(info.Offset), uint64(info.Length)
	if info.MR != nil {
		if info.MR.ext.hooks != nil {
			// The hooks are told offsets into their region; a window's
			// placements would be reported relative to the window.
			return s, fmt.Errorf("%w: memory windows cannot be bound to a region with hooks", ErrInvalidWR)
		}
		s.Region = info.MR.r
	}
	if qp != nil {
		s.QP = qp
	}
	return s, nil
}

// bindWR is what an OpBindMW work request carries to its start.
type bindWR struct {
	mw   *MW
	info BindInfo
}

// bindOf returns the bind of an OpBindMW work request, nil for others.
func bindOf(wr *SendWR) *bindWR {
	if wr.Op != OpBindMW {
		return nil
	}
	return &bindWR{mw: wr.MW, info: wr.Bind}
}

// checkBindWR checks an OpBindMW at post time; the bind itself is decided
// when the work request starts, in send-queue order.
func checkBindWR(wr *SendWR) error {
	switch {
	case len(wr.SGL) != 0:
		return fmt.Errorf("%w: bind-mw takes no SGL", ErrInvalidWR)
	case wr.MW == nil:
		return fmt.Errorf("%w: bind-mw without a window", ErrInvalidWR)
	case wr.MW.Type() != MWType2:
		return fmt.Errorf("%w: bind-mw binds type 2 windows; MW.Bind binds type 1", ErrInvalidWR)
	case wr.Bind.MR == nil:
		return fmt.Errorf("%w: bind-mw without a region", ErrInvalidWR)
	}
	return nil
}

// startBindMW carries out an OpBindMW: a type 2 window is unbound when it
// is bound, so nothing of a previous binding is under way to wait for.
func (e *engine) startBindMW(_ *sendOpInfo, _ uint32, w *sendWQE, _ []sgeRef) {
	qp := e.qp
	b := w.bind
	w.bind = nil
	if b.mw.pd != qp.pd {
		w.status, w.err = WCMWBindErr, fmt.Errorf("iwarp: bind mw: %w: window of another PD", stag.ErrBadBind)
	} else if spec, err := b.mw.spec(b.info, qp); err != nil {
		w.status, w.err = WCMWBindErr, err
	} else if _, _, err := b.mw.w.Bind(spec); err != nil {
		w.status, w.err = WCMWBindErr, fmt.Errorf("iwarp: bind mw: %w", err)
	}
	w.done = true
	qp.completeSQLocked()
}
