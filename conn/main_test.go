package conn

import (
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Every test in the package ends with no goroutine of the package left.
// A test whose memory runs away is stopped, with every goroutine's stack,
// before the kernel's OOM killer ends the process without a word.
func TestMain(m *testing.M) {
	go watchHeap(heapLimit)
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/iwarp-go/iwarp-go/conn.watchHeap"))
}

// heapLimit is far above what any test of the package holds (the
// largest, the scale benchmarks aside, hold tens of MiB).
const heapLimit = 4 << 30

func watchHeap(limit uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for range time.Tick(250 * time.Millisecond) {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > limit {
			fmt.Fprintf(os.Stderr, "conn tests: heap reached %d bytes (limit %d); goroutines:\n", s[0].Value.Uint64(), limit)
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			os.Exit(3)
		}
	}
}
