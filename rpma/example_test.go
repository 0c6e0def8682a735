package rpma_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/rpma"
)

// A sink answers a librpma 1.2 example client with this private data.
func ExampleSinkCommonData() {
	c, err := rpma.SinkCommonData(0, 1<<20, 0x00012301, 0, true)
	if err != nil {
		panic(err)
	}
	b := c.Append(nil)
	fmt.Println(len(b), c.MR.Usage, c.PeerCfg.DirectWriteToPmem)
	// Output: 28 READ_SRC|WRITE_DST|FLUSH_TYPE_VISIBILITY|FLUSH_TYPE_PERSISTENT true
}

// A target answering example 09's flush request.
func ExampleParseFlushRequest() {
	msg := rpma.FlushRequest{Offset: 0, Length: 1024, OpContext: 0xF01D}.Append(nil)
	req, err := rpma.ParseFlushRequest(msg)
	if err != nil {
		panic(err)
	}
	// ... persist [req.Offset, req.Offset+req.Length) of the region ...
	resp := rpma.FlushResponse{OpContext: req.OpContext}.Append(nil)
	fmt.Printf("%d-byte request, persist %d bytes at %d, %d-byte response % x\n",
		len(msg), req.Length, req.Offset, len(resp), resp)
	// Output: 27-byte request, persist 1024 bytes at 0, 9-byte response 09 1d f0 00 00 00 00 00 00
}
