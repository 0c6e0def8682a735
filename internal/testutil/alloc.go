package testutil

import "runtime"

// Allocated returns the bytes allocated while f runs (by every goroutine).
// Tests use it to show that a length field read from hostile input does not
// size an allocation: the bound they check is far above the input's size
// and far below what the field claims.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
