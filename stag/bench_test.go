package stag

import (
	"sync"
	"sync/atomic"
	"testing"
)

func benchRegion(b *testing.B) (*PD, *Region) {
	tab := newTable(b)
	pd := tab.NewPD()
	// A few neighbours so the lookup is not served from a lone page.
	for i := 0; i < 64; i++ {
		register(b, pd, make([]byte, 64), LocalRead, BaseZero())
	}
	return pd, register(b, pd, make([]byte, 64<<10), LocalWrite|RemoteWrite, BaseVA())
}

var sinkBytes []byte

func BenchmarkLookupHit(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag(), r.TO(4096)
	b.ReportAllocs()
	for b.Loop() {
		got, f := pd.Lookup(s, to, 1460, RemoteWrite)
		if f != OK {
			b.Fatal(f)
		}
		sinkBytes = got
	}
}

func BenchmarkLookupMissKey(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag()^0x5a, r.TO(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, f := pd.Lookup(s, to, 1460, RemoteWrite); f != InvalidSTag {
			b.Fatal(f)
		}
	}
}

func BenchmarkLookupMissIndex(b *testing.B) {
	pd, _ := benchRegion(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, f := pd.Lookup(MakeSTag(MaxIndex-1, 0), 0, 1460, RemoteWrite); f != InvalidSTag {
			b.Fatal(f)
		}
	}
}

func BenchmarkLookupMissBounds(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag(), r.TO(64<<10-100)
	b.ReportAllocs()
	for b.Loop() {
		if _, f := pd.Lookup(s, to, 1460, RemoteWrite); f != BaseBounds {
			b.Fatal(f)
		}
	}
}

// Lookups from all Ps at once: no shared lock, so they scale with cores.
func BenchmarkLookupHitParallel(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag(), r.TO(4096)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, f := pd.Lookup(s, to, 1460, RemoteWrite); f != OK {
				b.Fatal(f)
			}
		}
	})
}

// Lookups while another goroutine registers and deregisters in the same
// table: the writer's mutex never blocks the reader. The B/op reported here
// are the churning goroutine's Region allocations; allocs/op stays 0 because
// they are fewer than one per lookup.
func BenchmarkLookupHitDuringChurn(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag(), r.TO(4096)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for !stop.Load() {
			x, err := pd.Register(buf, LocalRead, BaseZero())
			if err == nil {
				_ = x.Deregister()
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, f := pd.Lookup(s, to, 1460, RemoteWrite); f != OK {
			b.Fatal(f)
		}
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
}

func BenchmarkCheckLocal(b *testing.B) {
	pd, r := benchRegion(b)
	b.ReportAllocs()
	for b.Loop() {
		got, f := pd.CheckLocal(r, 4096, 1460, LocalWrite)
		if f != OK {
			b.Fatal(f)
		}
		sinkBytes = got
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	_, r := benchRegion(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Acquire(); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkRegisterDeregister(b *testing.B) {
	tab := newTable(b)
	pd := tab.NewPD()
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		r, err := pd.Register(buf, LocalWrite|RemoteWrite, BaseVA())
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Deregister(); err != nil {
			b.Fatal(err)
		}
	}
}

// Registration into a table that already holds many regions.
func BenchmarkRegisterDeregisterPopulated(b *testing.B) {
	tab := newTable(b)
	pd := tab.NewPD()
	buf := make([]byte, 4096)
	for i := 0; i < 100000; i++ {
		register(b, pd, buf, LocalRead, BaseZero())
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := pd.Register(buf, LocalWrite|RemoteWrite, BaseVA())
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Deregister(); err != nil {
			b.Fatal(err)
		}
	}
}

// A Send with Invalidate followed by the owner re-validating the region
// under a new key (the fast-registration reuse cycle).
func BenchmarkRemoteInvalidateRevalidate(b *testing.B) {
	pd, r := benchRegion(b)
	b.ReportAllocs()
	for b.Loop() {
		if f := pd.RemoteInvalidate(r.STag()); f != OK {
			b.Fatal(f)
		}
		if _, err := r.Revalidate(); err != nil {
			b.Fatal(err)
		}
	}
}

// A refused Send with Invalidate (region of another PD): lock-free.
func BenchmarkRemoteInvalidateRefused(b *testing.B) {
	_, r := benchRegion(b)
	other := r.PD().Table().NewPD()
	b.ReportAllocs()
	for b.Loop() {
		if f := other.RemoteInvalidate(r.STag()); f != CannotInvalidatePD {
			b.Fatal(f)
		}
	}
}

// The receive path's lookup for a placement: LookupRemote then ReleaseRemote.
func BenchmarkLookupRemoteHit(b *testing.B) {
	pd, r := benchRegion(b)
	s, to := r.STag(), r.TO(4096)
	b.ReportAllocs()
	for b.Loop() {
		got, buf, f := pd.LookupRemote(s, to, 1460, RemoteWrite)
		if f != OK {
			b.Fatal(f)
		}
		sinkBytes = buf
		got.ReleaseRemote()
	}
}

// A local invalidate work request naming an STag (already invalid, so every
// iteration takes the same path): lock-free.
func BenchmarkInvalidate(b *testing.B) {
	pd, r := benchRegion(b)
	if err := r.Invalidate(); err != nil {
		b.Fatal(err)
	}
	s := r.STag()
	b.ReportAllocs()
	for b.Loop() {
		if f := pd.Invalidate(s); f != OK {
			b.Fatal(f)
		}
	}
}

// Lookups spread over 4096 of 100,000 live regions, so that the index
// structure is not all in the first-level cache.
func BenchmarkLookupHitLarge(b *testing.B) {
	tab := newTable(b, WithSeed([32]byte{9}))
	pd := tab.NewPD()
	buf := make([]byte, 64)
	var ss []STag
	for i := 0; i < 100000; i++ {
		r := register(b, pd, buf, LocalWrite|RemoteWrite, BaseZero())
		if i%24 == 0 && len(ss) < 4096 {
			ss = append(ss, r.STag())
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, f := pd.Lookup(ss[i&4095], 0, 64, RemoteWrite); f != OK {
			b.Fatal(f)
		}
		i++
	}
}

// Random guesses against a table of 100,000 regions: what a peer probing for
// STags costs the receive path.
func BenchmarkLookupMissLarge(b *testing.B) {
	tab := newTable(b, WithSeed([32]byte{9}))
	pd := tab.NewPD()
	buf := make([]byte, 64)
	for i := 0; i < 100000; i++ {
		register(b, pd, buf, LocalWrite|RemoteWrite, BaseZero())
	}
	var guesses [4096]STag
	for i := range guesses {
		guesses[i] = STag(uint32(i)*0x9E3779B1 | 1<<31)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = pd.Lookup(guesses[i&4095], 0, 64, RemoteWrite)
		i++
	}
}
