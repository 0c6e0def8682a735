package stag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// winModel is what a window should be after a sequence of operations.
type winModel struct {
	bound     bool
	off, n    uint64
	access    Access
	zero      bool
	owner     any
	s         STag
	everBound bool
}

// FuzzWindowOps drives a region and a window of each type through any
// sequence of binds, rebinds, invalidations (local, remote, from either of
// two streams), region invalidation, revalidation and deregistration, and
// checks every step and every lookup against a model: a lookup succeeds
// exactly when the model's binding allows it and returns exactly its bytes,
// and a region with windows bound never leaves the valid state.
func FuzzWindowOps(f *testing.F) {
	f.Add([]byte{0, 8, 16, 2, 7, 0, 0, 0, 1, 7})
	f.Add([]byte{1, 0, 32, 1, 5, 7, 1, 0, 8, 1, 3, 1, 0, 7, 1, 0, 0, 1})
	f.Add([]byte{0, 0, 64, 3, 5, 6, 2, 0, 5, 6, 7, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tab := newTable(t)
		pd := tab.NewPD()
		buf := make([]byte, 64)
		r := register(t, pd, buf, allAccess, BaseAt(0x1000))
		regValid, regFreed := true, false
		ws := [2]*Window{alloc(t, pd, WindowType1), alloc(t, pd, WindowType2)}
		var m [2]winModel
		for i := range m {
			m[i].s = ws[i].STag()
		}
		qs := [2]any{&stream{1}, &stream{2}}
		bound := func() int {
			n := 0
			for i := range m {
				if m[i].bound {
					n++
				}
			}
			return n
		}
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch op := next() % 8; op {
			case 0, 1: // bind window op
				i := int(op)
				spec := BindSpec{Region: r, Offset: uint64(next() % 72), Length: uint64(next() % 72),
					Access: Access(next()) & (remoteAccess | LocalWrite), ZeroBased: next()%2 == 1}
				q := qs[next()%2]
				spec.QP, spec.Key = q, next()
				cur, prev, err := ws[i].Bind(spec)
				wantOK := regValid && !regFreed && spec.Access != 0 && spec.Access&^remoteAccess == 0 &&
					within(spec.Offset, spec.Length, 64) && spec.Length > 0
				if i == 1 {
					wantOK = wantOK && !m[i].bound && spec.Key != m[i].s.Key()
				}
				switch {
				case i == 0 && spec.Length == 0:
					require.NoError(t, err)
					require.Equal(t, m[i].bound, prev != nil)
					m[i].bound = false
				case i == 1 && m[i].bound:
					require.ErrorIs(t, err, ErrWindowBound)
				case !wantOK:
					require.ErrorIs(t, err, ErrBadBind, "%+v", spec)
				default:
					require.NoError(t, err)
					require.Equal(t, m[i].bound, prev != nil)
					m[i] = winModel{bound: true, off: spec.Offset, n: spec.Length, access: spec.Access, zero: spec.ZeroBased, s: cur.STag(), everBound: true}
					if i == 1 {
						m[i].owner = q
						require.Equal(t, spec.Key, cur.STag().Key())
					}
				}
			case 2: // owner's invalidate
				i := int(next() % 2)
				prev := ws[i].Invalidate()
				require.Equal(t, m[i].bound, prev != nil)
				m[i].bound = false
			case 3, 4: // remote or work-request invalidation from a stream
				i, q := int(next()%2), qs[next()%2]
				var got Failure
				if op == 3 {
					got = pd.RemoteInvalidateFrom(m[i].s, q)
				} else {
					got = pd.InvalidateFrom(m[i].s, q)
				}
				var want Failure
				switch {
				case i == 0:
					want = CannotInvalidate
				case m[i].owner != nil && m[i].owner != q:
					want = QPMismatch
				case op == 3 && !m[i].bound:
					want = CannotInvalidate
				}
				require.Equal(t, want, got, "window %d op %d", i, op)
				if want == OK {
					m[i].bound = false
				}
			case 5: // region invalidate / revalidate
				if regFreed {
					continue
				}
				if regValid {
					err := r.Invalidate()
					if bound() > 0 {
						require.ErrorIs(t, err, ErrWindowsBound)
					} else {
						require.NoError(t, err)
						regValid = false
					}
				} else {
					_, err := r.Revalidate()
					require.NoError(t, err)
					regValid = true
				}
			case 6: // deregister
				err := r.Deregister()
				switch {
				case regFreed:
					require.ErrorIs(t, err, ErrDeregistered)
				case bound() > 0:
					require.ErrorIs(t, err, ErrWindowsBound)
				default:
					require.NoError(t, err)
					regFreed = true
				}
			case 7: // lookup through window i from stream q
				i, q := int(next()%2), qs[next()%2]
				to, n, need := uint64(next()), uint64(next()%72), Access(next())&remoteAccess
				w := &m[i]
				base := uint64(0x1000) + w.off
				if w.zero {
					base = 0
				}
				if !w.zero {
					to += 0x1000
				}
				x, got, fl := pd.LookupRemoteFrom(w.s, to, n, need, q)
				ok := w.bound && (w.owner == nil || w.owner == q) && w.access.Has(need) &&
					to >= base && within(to-base, n, w.n)
				require.Equal(t, ok, fl == OK, "window %d %+v to=%#x n=%d need=%v: %v", i, *w, to, n, need, fl)
				if ok {
					requireAliases(t, buf, got, w.off+(to-base), n)
					x.ReleaseRemote()
				} else if w.bound && w.owner != nil && w.owner != q {
					require.Equal(t, QPMismatch, fl)
				} else if !w.bound && w.everBound {
					require.True(t, fl == Invalidated || fl == InvalidSTag, "%v", fl)
				}
			}
			require.Equal(t, bound(), r.Windows())
			if bound() > 0 {
				require.Equal(t, StateValid, r.State())
			}
		}
		for _, w := range ws {
			_, err := w.Free()
			require.NoError(t, err)
		}
		if !regFreed {
			require.NoError(t, r.Deregister())
		}
		require.Zero(t, tab.Len())
	})
}
