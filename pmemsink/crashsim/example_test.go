package crashsim_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/pmemsink/crashsim"
)

// Record what a target does and check it: here a target that acknowledges
// a read-after-write flush before persisting.
func ExampleChecker() {
	work := make([]byte, 8192)
	sh := crashsim.NewShadow(len(work), 4096, 64, work)
	chk := crashsim.NewChecker(sh, 1)

	copy(work[100:], "abc") // the engine places a Write...
	chk.Write(0, 100, 3)    // ...and its placement observer reports it
	id := chk.Flush(0, crashsim.ReadAfterWrite, 0, 0)
	chk.Ack(id)           // the Read Response goes out
	_ = sh.Msync(0, 4096) // the persist comes too late
	fmt.Println(chk.Err())
	// Output: crashsim: ack before persist: flush 0 (read-after-write, conn 0) acknowledged while byte 100 (write 1) is not durable (durable: write 0)
}
