package stag

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// indexBytes is the memory held by the index structure: the Table, the
// current slot array and the quarantine. Regions are not counted.
func indexBytes(tab *Table) int {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	n := int(unsafe.Sizeof(*tab)) + int(unsafe.Sizeof(slotArray{})) + 8*len(tab.slots.Load().slots)
	if tab.q != nil {
		n += int(unsafe.Sizeof(*tab.q))
	}
	return n
}

// BenchmarkTableMemory reports the memory per live region of a table holding
// n regions: index-B/region counts the index structure (Table, slot array,
// quarantine); heap-B/region is the growth of the live heap, which adds the
// Region objects themselves (buffers are shared and not counted). The
// churned variants first run 4n+1000 register/deregister cycles on top of
// the n regions, which fills the quarantine and leaves deleted slots. One
// iteration builds one table, so ns/op is the time to register n regions.
func BenchmarkTableMemory(b *testing.B) {
	for _, churn := range []bool{false, true} {
		for _, n := range []int{1, 1000, 100_000, 1_000_000} {
			name := fmt.Sprintf("regions=%d", n)
			if churn {
				name += "/churned"
			}
			b.Run(name, func(b *testing.B) {
				var index, heap float64
				for b.Loop() {
					index, heap = measureTable(b, n, churn)
				}
				b.ReportMetric(index, "index-B/region")
				b.ReportMetric(heap, "heap-B/region")
			})
		}
	}
}

func measureTable(b *testing.B, n int, churn bool) (index, heap float64) {
	buf := make([]byte, 64)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	tab := newTable(b, WithSeed([32]byte{byte(n)}))
	pd := tab.NewPD()
	for range n {
		register(b, pd, buf, LocalWrite|RemoteWrite, BaseZero())
	}
	if churn {
		for range 4*n + 1000 {
			r := register(b, pd, buf, LocalWrite|RemoteWrite, BaseZero())
			if err := r.Deregister(); err != nil {
				b.Fatal(err)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	index = float64(indexBytes(tab)) / float64(n)
	heap = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
	runtime.KeepAlive(tab)
	return index, heap
}
