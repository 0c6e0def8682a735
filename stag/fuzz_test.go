package stag

import (
	"math/bits"
	"testing"
)

// model is an independent reference for the protection rules: a flat list of
// every registration ever made, searched linearly, with 128-bit arithmetic
// for the offsets instead of the overflow-avoiding comparisons of Lookup.
type modelReg struct {
	r        *Region
	s        STag
	pd       int
	buf      []byte
	base     uint64
	access   Access
	state    State
	noRemote bool
}

type model struct {
	regs    []*modelReg
	retired []STag // every STag that stopped naming its region, in order
}

// issued checks a newly handed-out STag: its index is not live elsewhere, and
// it is none of the last quarantineLen retired STags.
func (m *model) issued(t *testing.T, s STag, self *modelReg) {
	t.Helper()
	if x := m.live(s.Index()); x != nil && x != self {
		t.Fatalf("index %#x handed out twice", s.Index())
	}
	for _, x := range m.retired[max(0, len(m.retired)-quarantineLen):] {
		if x == s {
			t.Fatalf("retired STag %v handed out again", s)
		}
	}
}

func (m *model) live(index uint32) *modelReg {
	for _, x := range m.regs {
		if x.state != StateFree && x.s.Index() == index {
			return x
		}
	}
	return nil
}

func (m *model) liveCount() int {
	n := 0
	for _, x := range m.regs {
		if x.state != StateFree {
			n++
		}
	}
	return n
}

func (m *model) lookup(s STag, pd int, to, n uint64, need Access) (*modelReg, Failure) {
	x := m.live(s.Index())
	switch {
	case x == nil || x.s != s:
		return nil, InvalidSTag
	case x.state == StateInvalid:
		return nil, Invalidated
	case x.pd != pd:
		return nil, PDMismatch
	case x.access&need != need:
		return nil, AccessRights
	}
	if _, carry := bits.Add64(to, n, 0); carry != 0 {
		return nil, TOWrap
	}
	endLo, endHi := bits.Add64(x.base, uint64(len(x.buf)), 0)
	if to < x.base || endHi != 0 || to+n > endLo {
		return nil, BaseBounds
	}
	return x, OK
}

func (m *model) remoteInvalidate(s STag, pd int) Failure {
	x := m.live(s.Index())
	switch {
	case x == nil || x.s != s:
		return CannotInvalidate
	case x.pd != pd:
		return CannotInvalidatePD
	case x.state != StateValid || x.noRemote:
		return CannotInvalidate
	}
	x.state = StateInvalid
	return OK
}

// FuzzLookup drives a table through registrations, deregistrations and
// invalidations chosen by ops, mirrors them in the model, and then checks one
// arbitrary lookup (and every remote invalidation along the way) against the
// model. A successful lookup must return exactly the addressed bytes of the
// addressed registration, never anything else. Bulk registrations and
// deregistrations make the hash table grow and shrink; its invariants
// (checkTable) and the quarantine of retired STags are checked after every
// operation.
func FuzzLookup(f *testing.F) {
	// ops encoding: register = 0|1, len-1, slot, base mode (2 and 3 take one
	// more byte), pd, access (bit 4: NoRemoteInvalidate); deregister = 2, reg;
	// invalidate = 3, reg; remote invalidate = 4, reg, key flip, pd;
	// revalidate = 5, reg; bulk register = 6, count-1 (up to 32 regions,
	// all rights, zero-based); bulk deregister = 7, count-1 (the oldest live
	// registrations). mode: bit 0 addresses a registration (rawSTag
	// picks it, bits 4-7 flip key bits), bit 1 selects the PD, bit 2 makes
	// to relative to that registration's base.
	f.Add([]byte{0, 10, 0, 0, 0, 15}, uint32(0), uint8(1|4), uint64(0), uint64(11), uint8(RemoteWrite))                        // OK, whole region
	f.Add([]byte{0, 63, 1, 1, 1, 15, 0, 5, 2, 2, 1, 0, 31}, uint32(0), uint8(1|2|4), uint64(60), uint64(4), uint8(RemoteRead)) // OK, VA, offset 60
	f.Add([]byte{0, 63, 1, 1, 1, 15}, uint32(0), uint8(1|4), uint64(0), uint64(4), uint8(RemoteRead))                          // PDMismatch
	f.Add([]byte{0, 7, 3, 0, 0, 15, 3, 0}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(LocalRead))                      // Invalidated (local)
	f.Add([]byte{0, 7, 3, 0, 0, 15, 4, 0, 0, 0}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(LocalRead))                // Invalidated (remote)
	f.Add([]byte{0, 20, 2, 0, 0, 7, 4, 0, 1, 1}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(0))                        // wrong-key invalidate refused
	f.Add([]byte{0, 20, 2, 0, 0, 31, 4, 0, 0, 0}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(0))                       // opted out of remote invalidate
	f.Add([]byte{0, 20, 0, 0, 0, 15, 2, 0, 0, 20, 1, 0, 0, 15}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(0))         // freed, index reused
	f.Add([]byte{0, 20, 0, 0, 0, 15, 3, 0, 5, 0}, uint32(0), uint8(1|4), uint64(5), uint64(10), uint8(RemoteRead))             // revalidated, OK
	f.Add([]byte{0, 20, 0, 0, 0, 7}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(RemoteWrite))                          // AccessRights
	f.Add([]byte{0, 10, 0, 3, 1, 0, 15}, uint32(0), uint8(1|4), uint64(10), uint64(1), uint8(RemoteRead))                      // OK, last TO 2^64-2
	f.Add([]byte{0, 10, 0, 3, 1, 0, 15}, uint32(0), uint8(1|4), uint64(10), uint64(2), uint8(RemoteRead))                      // TOWrap at the top
	f.Add([]byte{0, 10, 0, 3, 0, 0, 15}, uint32(0), uint8(1|4), uint64(0), uint64(1), uint8(0))                                // ErrBaseOverflow
	f.Add([]byte{0, 10, 0, 0, 0, 15}, uint32(0), uint8(1|4), uint64(11), uint64(0), uint8(0))                                  // zero length at the end
	f.Add([]byte{0, 10, 0, 0, 0, 15}, uint32(0), uint8(1|4), uint64(12), uint64(0), uint8(0))                                  // zero length past the end
	f.Add([]byte{0, 10, 0, 2, 1, 0, 15}, uint32(0), uint8(1|4), ^uint64(0), uint64(1), uint8(0))                               // below base (wrapped to)
	f.Add([]byte{0, 10, 0, 0, 0, 15}, uint32(0), uint8(1|0x10), uint64(0), uint64(1), uint8(0))                                // wrong key
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, uint32(0xffffffff), uint8(0), uint64(1<<63), uint64(1<<63), uint8(15))         // raw STag
	f.Add([]byte{6, 31, 6, 31, 7, 20, 0, 10, 0, 0, 0, 15}, uint32(0), uint8(1|4), uint64(0), uint64(11), uint8(RemoteWrite))   // grown, shrunk, OK
	f.Add([]byte{6, 31, 6, 31, 6, 31, 7, 31, 7, 31, 7, 31, 6, 3}, uint32(5), uint8(1|4), uint64(0), uint64(1), uint8(0))       // filled, emptied, refilled

	f.Fuzz(func(t *testing.T, ops []byte, rawSTag uint32, mode uint8, to, length uint64, need uint8) {
		if len(ops) > 512 {
			ops = ops[:512] // bound the work per input
		}
		const span = 64
		tab, err := NewTable(WithSeed([32]byte{1}), withIndexRange(0x100, 0x100+span-1))
		if err != nil {
			t.Fatal(err)
		}
		pds := []*PD{tab.NewPD(), tab.NewPD()}
		arena := make([]byte, 64*64)
		var m model
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		pick := func() *modelReg {
			if len(m.regs) == 0 {
				return nil
			}
			return m.regs[int(next())%len(m.regs)]
		}
		for len(ops) > 0 {
			switch next() % 8 {
			case 0, 1: // register
				n := 1 + int(next())%64
				slot := int(next()) % 64
				buf := arena[slot*64 : slot*64+n]
				var b Base
				switch next() % 4 {
				case 0:
					b = BaseZero()
				case 1:
					b = BaseVA()
				case 2:
					b = BaseAt(uint64(next()) << 56)
				default:
					b = BaseAt(^uint64(0) - uint64(n) - uint64(next()%3) + 1)
				}
				pd := int(next()) % 2
				a := next()
				full := m.liveCount() == span
				r, err := pds[pd].Register(buf, Access(a&15), b, optIf(a&16 != 0))
				if Access(a&15).Validate() != nil {
					if err == nil {
						t.Fatalf("registered invalid access %v", Access(a&15))
					}
					continue
				}
				if bb := b.resolve(buf); bb > ^uint64(0)-uint64(n) {
					if err != ErrBaseOverflow {
						t.Fatalf("base %#x len %d: err %v", bb, n, err)
					}
					continue
				}
				if full {
					if err != ErrTableFull {
						t.Fatalf("full table: err %v", err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				m.issued(t, r.STag(), nil)
				m.regs = append(m.regs, &modelReg{r: r, s: r.STag(), pd: pd, buf: buf,
					base: r.Base(), access: Access(a & 15), state: StateValid, noRemote: a&16 != 0})
			case 2: // deregister
				if x := pick(); x != nil {
					err := x.r.Deregister()
					if (x.state == StateFree) != (err == ErrDeregistered) || (x.state != StateFree && err != nil) {
						t.Fatalf("deregister in state %v: %v", x.state, err)
					}
					if x.state != StateFree {
						m.retired = append(m.retired, x.s)
					}
					x.state = StateFree
				}
			case 3: // local invalidate
				if x := pick(); x != nil {
					err := x.r.Invalidate()
					if (x.state == StateFree) != (err == ErrDeregistered) {
						t.Fatalf("invalidate in state %v: %v", x.state, err)
					}
					if x.state == StateValid {
						x.state = StateInvalid
					}
				}
			case 4: // remote invalidate, possibly with a wrong key or PD
				if x := pick(); x != nil {
					s := x.s ^ STag(next()&1)
					pd := int(next()) % 2
					if got, want := pds[pd].RemoteInvalidate(s), m.remoteInvalidate(s, pd); got != want {
						t.Fatalf("remote invalidate %v on pd %d: got %v want %v", s, pd, got, want)
					}
				}
			case 5: // revalidate
				if x := pick(); x != nil {
					s, err := x.r.Revalidate()
					switch x.state {
					case StateInvalid:
						if err != nil || s.Index() != x.s.Index() || s.Key() == x.s.Key() {
							t.Fatalf("revalidate: %v %v (was %v)", s, err, x.s)
						}
						m.issued(t, s, x)
						m.retired = append(m.retired, x.s)
						x.s, x.state = s, StateValid
					case StateValid:
						if err != ErrNotInvalid {
							t.Fatalf("revalidate valid: %v", err)
						}
					default:
						if err != ErrDeregistered {
							t.Fatalf("revalidate free: %v", err)
						}
					}
				}
			case 6: // bulk register
				for n := 1 + int(next())%32; n > 0 && m.liveCount() < span; n-- {
					slot := len(m.regs) % 64
					buf := arena[slot*64 : slot*64+64]
					pd := len(m.regs) % 2
					r, err := pds[pd].Register(buf, allAccess, BaseZero())
					if err != nil {
						t.Fatal(err)
					}
					m.issued(t, r.STag(), nil)
					m.regs = append(m.regs, &modelReg{r: r, s: r.STag(), pd: pd, buf: buf,
						base: 0, access: allAccess, state: StateValid})
				}
			case 7: // bulk deregister
				n := 1 + int(next())%32
				for _, x := range m.regs {
					if n == 0 {
						break
					}
					if x.state != StateFree {
						if err := x.r.Deregister(); err != nil {
							t.Fatal(err)
						}
						m.retired = append(m.retired, x.s)
						x.state = StateFree
						n--
					}
				}
			}
			checkTable(t, tab)
			if n := tableSlots(tab); n > max(minSlots, 16*tab.Len()) {
				t.Fatalf("%d slots for %d regions", n, tab.Len())
			}
		}

		s := STag(rawSTag)
		if mode&1 != 0 && len(m.regs) > 0 {
			x := m.regs[int(rawSTag)%len(m.regs)]
			s = x.s ^ STag(mode>>4)
			if mode&4 != 0 {
				to += x.base // wrapping on purpose
			}
		}
		pd := int(mode>>1) & 1
		got, fail := pds[pd].Lookup(s, to, length, Access(need))
		x, want := m.lookup(s, pd, to, length, Access(need))
		if fail != want {
			t.Fatalf("lookup %v pd %d to %#x len %#x need %v: got %v want %v", s, pd, to, length, Access(need), fail, want)
		}
		if fail != OK {
			if got != nil {
				t.Fatalf("failure %v returned memory", fail)
			}
			return
		}
		off := to - x.base
		if uint64(len(got)) != length || uint64(cap(got)) != length || !inside(x.buf, got) {
			t.Fatalf("slice len %d cap %d outside its region", len(got), cap(got))
		}
		if length > 0 && &got[0] != &x.buf[off] {
			t.Fatalf("slice does not start at offset %d", off)
		}
	})
}

func optIf(b bool) RegisterOption {
	if b {
		return NoRemoteInvalidate
	}
	return 0
}
