package pmemsink_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/pmemsink"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// What an initiator reads from the private data of librpma 1.2's example
// 05 server on persistent memory without its "on" argument: the region
// may be written and read, its flush type is persistent, but it declares
// no direct write to pmem, so a read-after-write flush is only Placed.
func ExampleRemote_Declares() {
	blob := rpma.CommonData{
		DataOffset: 17,
		MR: rpma.MRDescriptor{Addr: 0x7f0000001000, Length: 4096, RKey: 0x1234,
			Usage: rpma.UsageWriteDst | rpma.UsageFlushTypeVisibility | rpma.UsageFlushTypePersistent},
		HasPeerCfg: true,
	}.Append(nil)
	r, err := pmemsink.ParseRemote(blob)
	if err != nil {
		panic(err)
	}
	fmt.Println("usage:", r.Usage)
	fmt.Println("writable:", r.Writable(), "readable:", r.Readable())
	fmt.Println("read-after-write persistent:", r.Declares(pmemsink.MethodReadAfterWrite))
	// Output:
	// usage: WRITE_DST|FLUSH_TYPE_VISIBILITY|FLUSH_TYPE_PERSISTENT
	// writable: true readable: true
	// read-after-write persistent: false
}
