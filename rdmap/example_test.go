package rdmap_test

import (
	"errors"
	"fmt"
	"net"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// The receive path: classify a ULPDU header, run the DDP queue checks, and
// on failure build the Terminate to send.
func Example_receive() {
	queues := ddp.NewUntaggedQueues(rdmap.NumQueues)
	ulpdu := rdmap.AppendSend(nil, rdmap.OpSend, true, 0, 1, 0) // a Send of 16 bytes, MSN 1
	ulpduLen := len(ulpdu) + 16

	h, err := rdmap.Parse(ulpdu, ulpduLen)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Op, "MSN", h.Untagged().MSN(), "payload", h.PayloadLen)

	// No receive is posted: the queue refuses the message.
	_, err = queues.Receive(h.Untagged(), ulpduLen, ddp.NoBuffer)
	te := rdmap.LocalTerminateError(err)
	wire := rdmap.AppendTerminate(nil, &te.Terminate)
	m, d, r := te.Terminate.Flags()
	fmt.Println(te.Code)
	fmt.Println("M D R:", m, d, r, "Terminate ULPDU bytes:", len(wire))
	fmt.Println("stream closed:", errors.Is(te, net.ErrClosed))
	// Output:
	// Send MSN 1 payload 16
	// DDP Untagged Buffer Error: Invalid MSN - no buffer available (1/2/0x02)
	// M D R: true true false Terminate ULPDU bytes: 42
	// stream closed: true
}

// A Terminate from Linux siw on x86: its control field is laid out by C
// bit-fields, so the layer and error type nibbles are swapped and M/D/R sit
// in the low bits. Both readings are kept; the registered one is chosen.
func ExampleParseTerminate() {
	ulpdu := []byte{
		0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, // QN 2, MSN 1, MO 0
		0x11, 0x00, 0x03, 0x00, // siw: DDP tagged invalid STag, M and D
		0x00, 0x40, // DDP Segment Length (siw: payload only)
		0xc1, 0x42, 0x3e, 0x73, 0x9b, 0x00, 0, 0, 0x56, 0x4f, 0x60, 0x6d, 0x55, 0x50,
	}
	rt, err := rdmap.ParseTerminate(ulpdu)
	if err != nil {
		panic(err)
	}
	fmt.Println(rt.Layout)
	fmt.Println(rt.Code())
	fmt.Printf("segment length %d, terminated header %x\n", rt.SegmentLen, rt.DDPHeader)
	fmt.Println(rt.Err())
	// Output:
	// siw little-endian layout
	// DDP Tagged Buffer Error: Invalid Steering Tag (1/1/0x00)
	// segment length 64, terminated header c1423e739b000000564f606d5550
	// rdmap: peer sent Terminate: DDP Tagged Buffer Error: Invalid Steering Tag (1/1/0x00) [siw little-endian layout]
}

// Sending an RDMA Write in MULPDU-sized segments without copying.
func ExampleStartWrite() {
	var s ddp.Segmenter
	payload := [][]byte{make([]byte, 3000)}
	if err := rdmap.StartWrite(&s, payload, 1442, 0x2222, 0x2000); err != nil {
		panic(err)
	}
	var hdr [ddp.MaxHeaderLen]byte
	var pieces [2][]byte
	for {
		seg, ok := s.Next(hdr[:0], pieces[:0])
		if !ok {
			break
		}
		h, _ := rdmap.Parse(seg.Header, len(seg.Header)+seg.Len)
		fmt.Printf("%v STag %#x TO %#x len %d last %v\n", h.Op, h.Tagged().STag(), h.Tagged().TO(), seg.Len, seg.Last)
	}
	// Output:
	// RDMA Write STag 0x2222 TO 0x2000 len 1428 last false
	// RDMA Write STag 0x2222 TO 0x2594 len 1428 last false
	// RDMA Write STag 0x2222 TO 0x2b28 len 144 last true
}
