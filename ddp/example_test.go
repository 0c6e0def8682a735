package ddp_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// A sender splits one untagged message, given as two pieces, into segments
// that fit a 40-byte MULPDU (22 payload bytes each). Header and payload
// buffers are reused for every segment.
func ExampleSegmenter() {
	msg := [][]byte{[]byte("hello, "), []byte("direct data placement!")}
	var s ddp.Segmenter
	if err := s.StartUntagged(msg, 40, 0x43, 0, 0, 1); err != nil {
		panic(err)
	}
	var hdr [ddp.MaxHeaderLen]byte
	payload := make([][]byte, 0, len(msg))
	for {
		seg, ok := s.Next(hdr[:0], payload[:0])
		if !ok {
			break
		}
		h := ddp.Untagged(seg.Header)
		fmt.Printf("MSN %d MO %2d L=%v %d bytes in %d piece(s)\n",
			h.MSN(), h.MO(), seg.Last, seg.Len, len(seg.Payload))
	}
	// Output:
	// MSN 1 MO  0 L=false 22 bytes in 2 piece(s)
	// MSN 1 MO 22 L=true 7 bytes in 1 piece(s)
}

// A receiver checks untagged segments against its queues before placing
// them. The second message finds no posted buffer.
func ExampleUntaggedQueues() {
	qs := ddp.NewUntaggedQueues(3)
	send := func(msn uint32) ddp.Untagged {
		return ddp.Untagged(ddp.AppendUntagged(nil, ddp.MakeControl(false, true), 0x43, 0, 0, msn, 0))
	}
	s, err := qs.Receive(send(1), ddp.UntaggedHeaderLen+16, 64)
	fmt.Println(s.MsgLen, err)
	_, err = qs.Receive(send(2), ddp.UntaggedHeaderLen+16, ddp.NoBuffer)
	fmt.Println(err)
	if c, ok := termcode.Of(err); ok {
		fmt.Printf("Terminate code %#04x\n", uint16(c))
	}
	// Output:
	// 16 <nil>
	// ddp: DDP Untagged Buffer Error: Invalid MSN - no buffer available (1/2/0x02): untagged segment QN 0 MSN 2 MO 0, segment length 34
	// Terminate code 0x1202
}
