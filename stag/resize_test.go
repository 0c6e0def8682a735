package stag

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// resizeHarness runs lookups from reader goroutines while one writer
// registers and deregisters regions, which makes the hash table grow, shrink
// and rehash under the readers. It checks what a resize could break:
//
//   - pinned regions, registered before the readers start and never
//     touched, are always found, with exactly the addressed bytes;
//   - a region the writer has published as live (after Register returned,
//     until it takes it back before Deregister) is found by every lookup
//     that starts and ends while it is published: no false miss;
//   - a deregistered region is never returned again.
type resizeHarness struct {
	tab    *Table
	pd     *PD
	arena  []byte
	pinned []*Region
	live   []atomic.Pointer[liveEntry]
	dead   [64]atomic.Pointer[liveEntry]
	ndead  int
	done   atomic.Bool
	errs   atomic.Pointer[string]
	hits   atomic.Int64
	wg     sync.WaitGroup
}

type liveEntry struct {
	s STag
	r *Region
}

const harnessChunk = 16

func newResizeHarness(t *testing.T, tab *Table, slots, readers int) *resizeHarness {
	h := &resizeHarness{tab: tab, pd: tab.NewPD(), arena: make([]byte, (slots+8)*harnessChunk),
		live: make([]atomic.Pointer[liveEntry], slots)}
	for i := range 8 {
		buf := h.arena[(slots+i)*harnessChunk : (slots+i+1)*harnessChunk]
		h.pinned = append(h.pinned, register(t, h.pd, buf, allAccess, BaseAt(uint64(i)<<40)))
	}
	for g := range readers {
		h.wg.Add(1)
		go h.read(uint64(g))
	}
	return h
}

func (h *resizeHarness) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.errs.CompareAndSwap(nil, &msg)
}

func (h *resizeHarness) read(g uint64) {
	defer h.wg.Done()
	rng := rand.New(rand.NewPCG(g, 7))
	for !h.done.Load() {
		p := h.pinned[rng.IntN(len(h.pinned))]
		off := uint64(rng.IntN(harnessChunk))
		got, f := h.pd.Lookup(p.STag(), p.TO(off), harnessChunk-off, RemoteWrite)
		if f != OK {
			h.fail("pinned %v: %v", p.STag(), f)
		} else if unsafe.SliceData(got) != &p.Bytes()[off] || len(got) != harnessChunk-int(off) {
			h.fail("pinned %v: wrong bytes", p.STag())
		}

		k := rng.IntN(len(h.live))
		if e := h.live[k].Load(); e != nil {
			_, f := h.pd.Lookup(e.s, 0, 1, RemoteWrite)
			if f != OK && h.live[k].Load() == e {
				h.fail("live %v missed: %v", e.s, f)
			}
			if f == OK {
				h.hits.Add(1)
			}
		}

		if e := h.dead[rng.IntN(len(h.dead))].Load(); e != nil {
			// A hit is only correct if the STag was handed out again, to
			// another region.
			if r, _, f := h.pd.LookupRemote(e.s, 0, 1, RemoteWrite); f == OK {
				if r == e.r {
					h.fail("deregistered region %v found", e.s)
				}
				r.ReleaseRemote()
			}
		}
	}
}

// register publishes a new region in live slot k if it is empty.
func (h *resizeHarness) register(t *testing.T, k int) {
	if h.live[k].Load() != nil {
		return
	}
	r, err := h.pd.Register(h.arena[k*harnessChunk:(k+1)*harnessChunk], allAccess, BaseZero())
	if err == ErrTableFull {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	h.live[k].Store(&liveEntry{r.STag(), r})
}

// deregister takes slot k's region back from the readers, then deregisters it.
func (h *resizeHarness) deregister(t *testing.T, k int) {
	e := h.live[k].Swap(nil)
	if e == nil {
		return
	}
	if err := e.r.Deregister(); err != nil {
		t.Fatal(err)
	}
	h.dead[h.ndead%len(h.dead)].Store(e)
	h.ndead++
}

func (h *resizeHarness) finish(t *testing.T) {
	h.done.Store(true)
	h.wg.Wait()
	if msg := h.errs.Load(); msg != nil {
		t.Fatal(*msg)
	}
	for k := range h.live {
		h.deregister(t, k)
	}
	for _, p := range h.pinned {
		if err := p.Deregister(); err != nil {
			t.Fatal(err)
		}
	}
	checkTable(t, h.tab)
	if h.tab.Len() != 0 || tableSlots(h.tab) != minSlots {
		t.Fatalf("%d regions in %d slots left", h.tab.Len(), tableSlots(h.tab))
	}
}

// The table grows from 8 to 4,104 regions and shrinks back, four times, under
// four readers (run with -race).
func TestTable_ResizeUnderLookups(t *testing.T) {
	const n = 4096
	h := newResizeHarness(t, newTable(t), n, 4)
	for cycle := range 4 {
		for k := range n {
			h.register(t, k)
		}
		checkTable(t, h.tab)
		if cycle%2 == 0 {
			for k := range n {
				h.deregister(t, k)
			}
		} else {
			for k := n - 1; k >= 0; k-- {
				h.deregister(t, k)
			}
		}
	}
	hits := h.hits.Load()
	h.finish(t)
	if hits == 0 {
		t.Fatal("no lookup of a live region succeeded")
	}
}

// FuzzTableConcurrent is the resize harness driven by fuzzed writer
// operations, in a range of 512 indices so that indices and (after the
// quarantine) STags come back: op%4 = 0 registers a burst of up to 64 regions
// into free slots from a slot chosen by the next byte, 1 deregisters such a
// burst, 2 and 3 register or deregister one slot.
func FuzzTableConcurrent(f *testing.F) {
	f.Add([]byte{0, 0, 63, 0, 64, 63, 0, 128, 63, 1, 0, 63, 1, 64, 63, 1, 128, 63})
	f.Add([]byte{0, 0, 255, 0, 255, 255, 1, 0, 255, 1, 255, 255, 0, 7, 255})
	f.Add([]byte{2, 1, 2, 2, 3, 1, 2, 3, 3, 2, 2, 1, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		const slots = 256
		tab, err := NewTable(WithSeed([32]byte{3}), withIndexRange(0x100, 0x2ff))
		if err != nil {
			t.Fatal(err)
		}
		h := newResizeHarness(t, tab, slots, 2)
		next := func() int {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return int(b)
		}
		for len(ops) > 0 {
			switch op, k := next()%4, next()%slots; op {
			case 0, 1:
				for i := range 1 + next()%64 {
					if op == 0 {
						h.register(t, (k+i)%slots)
					} else {
						h.deregister(t, (k+i)%slots)
					}
				}
			case 2:
				h.register(t, k)
			case 3:
				h.deregister(t, k)
			}
		}
		h.finish(t)
	})
}
