package stag

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Registrations, deregistrations, invalidations, references and lookups from
// many goroutines. Every registration's buffer is a sub-slice of one chunk of
// a shared arena, and each chunk keeps the history of what was registered in
// it, so a successful lookup can be checked against the registration it must
// have come from: same STag, same PD, exactly the addressed bytes.
func TestConcurrent_LookupsStayInsideTheirRegistration(t *testing.T) {
	t.Run("one page, indices reused", func(t *testing.T) {
		runConcurrent(t, withIndexRange(0x1000, 0x1060))
	})
	t.Run("whole index space, table resized", func(t *testing.T) {
		runConcurrent(t, withIndexRange(FirstIndex, MaxIndex))
	})
}

func runConcurrent(t *testing.T, opt TableOption) {
	const (
		chunks    = 32
		chunkSize = 256
		lookers   = 4
		lookups   = 20000
	)
	tab := newTable(t, opt)
	pds := []*PD{tab.NewPD(), tab.NewPD()}
	arena := make([]byte, chunks*chunkSize)

	type entry struct {
		s      STag
		pd     *PD
		off, n uint64 // the registered sub-slice of the chunk
		base   uint64
	}
	type chunk struct {
		mu   sync.Mutex
		cur  *Region
		hist []entry
	}
	var cs [chunks]chunk
	type hint struct {
		s    STag
		base uint64
		n    uint64
	}
	var hints [16]atomic.Pointer[hint]

	var done atomic.Bool
	var wg sync.WaitGroup
	var errs atomic.Int32
	fail := func() { errs.Add(1) }

	// Registrars: register into a free chunk or deregister / invalidate /
	// revalidate its region.
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !done.Load() {
				i := rng.IntN(chunks)
				c := &cs[i]
				c.mu.Lock()
				switch {
				case c.cur == nil:
					off := uint64(rng.IntN(chunkSize / 2))
					n := 1 + uint64(rng.IntN(chunkSize/2))
					buf := arena[uint64(i)*chunkSize+off : uint64(i)*chunkSize+off+n]
					var b Base
					switch rng.IntN(3) {
					case 0:
						b = BaseZero()
					case 1:
						b = BaseVA()
					default:
						b = BaseAt(rng.Uint64() >> 1)
					}
					pd := pds[rng.IntN(2)]
					r, err := pd.Register(buf, allAccess, b)
					if err != nil {
						fail()
						c.mu.Unlock()
						continue
					}
					c.cur = r
					c.hist = append(c.hist, entry{r.STag(), pd, off, n, r.Base()})
					hints[rng.IntN(len(hints))].Store(&hint{r.STag(), r.Base(), n})
				case rng.IntN(4) == 0:
					if c.cur.Invalidate() != nil {
						fail()
					}
				case rng.IntN(4) == 0 && c.cur.State() == StateInvalid:
					s, err := c.cur.Revalidate()
					if err != nil {
						fail()
					}
					c.hist = append(c.hist, entry{s, c.cur.pd, c.hist[len(c.hist)-1].off, uint64(c.cur.Len()), c.cur.Base()})
				default:
					switch err := c.cur.Deregister(); err {
					case nil:
						c.cur = nil
					case ErrBusy:
					default:
						fail()
					}
				}
				c.mu.Unlock()
			}
		}(g)
	}
	// A holder pins regions like posted work requests do.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		for !done.Load() {
			c := &cs[rng.IntN(chunks)]
			c.mu.Lock()
			r := c.cur
			c.mu.Unlock()
			if r == nil || r.Acquire() != nil {
				continue
			}
			if r.State() == StateFree {
				fail()
			}
			r.Release()
		}
	}()

	var successes atomic.Int64
	var lw sync.WaitGroup
	for g := 0; g < lookers; g++ {
		lw.Add(1)
		go func(g int) {
			defer lw.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			base := uintptr(unsafe.Pointer(&arena[0]))
			for i := 0; i < lookups; {
				h := hints[rng.IntN(len(hints))].Load()
				if h == nil {
					runtime.Gosched() // nothing registered yet
					continue
				}
				i++
				s := h.s
				if rng.IntN(8) == 0 {
					s ^= STag(1 + rng.IntN(255))
				}
				off := uint64(rng.IntN(int(h.n) + 2))
				n := uint64(rng.IntN(int(h.n) + 2))
				to := h.base + off
				pd := pds[rng.IntN(2)]
				got, f := pd.Lookup(s, to, n, RemoteWrite)
				if f != OK {
					continue
				}
				successes.Add(1)
				if len(got) == 0 {
					continue
				}
				p := uintptr(unsafe.Pointer(&got[0]))
				if p < base || p+uintptr(len(got)) > base+uintptr(len(arena)) {
					fail()
					continue
				}
				c := &cs[(p-base)/chunkSize]
				c.mu.Lock()
				ok := false
				for _, e := range c.hist {
					if e.s != s || e.pd != pd || to < e.base || to-e.base+n > e.n {
						continue
					}
					want := base + (p-base)/chunkSize*chunkSize + uintptr(e.off+to-e.base)
					if p == want && cap(got) == int(n) {
						ok = true
						break
					}
				}
				c.mu.Unlock()
				if !ok {
					fail()
				}
			}
		}(g)
	}
	lw.Wait()
	done.Store(true)
	wg.Wait()

	require.Zero(t, errs.Load())
	require.Positive(t, successes.Load(), "the success path must have been exercised")

	live := 0
	for i := range cs {
		if cs[i].cur != nil {
			live++
			require.NoError(t, cs[i].cur.Deregister())
		}
	}
	require.Zero(t, tab.Len())
	require.Equal(t, minSlots, tableSlots(tab))
	checkTable(t, tab)
}
