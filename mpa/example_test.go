package mpa_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Connection setup over TCP: the responder reads the Request, looks at its
// private data and accepts; both sides get the same settled options.
func Example_handshake() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	done := make(chan *mpa.Result)
	go func() {
		c, _ := ln.Accept()
		defer c.Close()
		req, err := mpa.ReadRequest(ctx, c, &mpa.Config{IRD: 16, ORD: 16})
		if err != nil {
			panic(err)
		}
		fmt.Printf("responder got %q\n", req.Frame.PrivateData)
		res, err := req.Accept(ctx, []byte("welcome"))
		if err != nil {
			panic(err)
		}
		done <- res
	}()

	c, _ := net.Dial("tcp", ln.Addr().String())
	defer c.Close()
	res, err := mpa.Connect(ctx, c, &mpa.Config{IRD: 4, ORD: 8}, []byte("hello"))
	if err != nil {
		panic(err)
	}
	resp := <-done
	fmt.Printf("initiator got %q\n", res.PeerPrivateData)
	fmt.Println("CRC:", res.CRC, resp.CRC)
	fmt.Println("initiator may issue", res.ORD, "reads; responder", resp.ORD)
	fmt.Println("responder waits for the first FPDU:", resp.WaitForPeerFPDU)
	// Output:
	// responder got "hello"
	// initiator got "welcome"
	// CRC: true true
	// initiator may issue 8 reads; responder 4
	// responder waits for the first FPDU: true
}

// A Request the responder does not want is rejected with private data,
// which the initiator receives in a *RejectedError.
func Example_reject() {
	req, _ := mpa.BuildRequest(&mpa.Config{}, []byte("let me in"))
	rep, _ := mpa.RejectReply(&mpa.Config{}, &req, []byte("not today"))
	_, err := mpa.CheckReply(&mpa.Config{}, &req, &rep)
	var re *mpa.RejectedError
	fmt.Println(errors.Is(err, mpa.ErrRejected), errors.As(err, &re), string(re.PrivateData))
	// Output: true true not today
}

// FPDUs: a Writer batches FPDUs and flushes them with one writev; a Reader
// takes them apart step by step, placing the payload where the caller
// wants it and checking the CRC at the end.
func Example_fpdu() {
	var wire bytes.Buffer
	w := mpa.NewWriter(&wire, mpa.WriterConfig{CRC: true})
	hdr := []byte{0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0} // a DDP tagged header
	_ = w.WriteFPDU(hdr, []byte("hello, "), []byte("world"))         // gathered from two slices
	_ = w.WriteFPDU(hdr, []byte("!"))
	_ = w.Flush()

	r := mpa.NewReader(&wire, mpa.ReaderConfig{CRC: true})
	for {
		n, err := r.Next()
		if err != nil {
			break // io.EOF at the end
		}
		h, _ := r.Peek(14)
		_ = r.Discard(len(h))
		payload := make([]byte, n-len(h))
		_ = r.ReadFull(payload)
		fmt.Printf("ULPDU %d bytes, header %x, payload %q, CRC ok: %v\n", n, h[:2], payload, r.End() == nil)
	}
	// Output:
	// ULPDU 26 bytes, header c140, payload "hello, world", CRC ok: true
	// ULPDU 15 bytes, header c140, payload "!", CRC ok: true
}

// Errors that call for a Terminate carry its code, a termcode.Code in the
// one code space the ddp and rdmap packages use too.
func ExampleError_code() {
	bad := []byte{0, 4, 1, 2, 3, 4, 0, 0, 0, 0, 0xde, 0xad} // FPDU with a wrong CRC field
	r := mpa.NewReader(bytes.NewReader(bad), mpa.ReaderConfig{CRC: true})
	_, err := r.ReadFPDU(make([]byte, 16))
	var c termcode.Code
	if errors.As(err, &c) {
		fmt.Printf("Terminate 0x%04x: %v\n", uint16(c), errors.Is(err, mpa.ErrCRC))
	}
	// Output: Terminate 0x2002: true
}

// After a CRC error a Reader delivers no more FPDUs (RFC 5044 §8); a
// decoder of a captured stream opts in to reading on.
func ExampleReaderConfig_captures() {
	var wire bytes.Buffer
	w := mpa.NewWriter(&wire, mpa.WriterConfig{CRC: true})
	for _, s := range []string{"one", "two", "three"} {
		_ = w.WriteFPDU([]byte{0x41, 0x43}, []byte(s))
	}
	_ = w.Flush()
	stream := wire.Bytes()
	stream[5] ^= 1 // a payload bit of the first FPDU

	for _, cfg := range []mpa.ReaderConfig{{CRC: true}, {CRC: true, ContinueAfterCRCError: true}} {
		r := mpa.NewReader(bytes.NewReader(stream), cfg)
		fmt.Print("continue ", cfg.ContinueAfterCRCError, ":")
		for range 3 { // the stream holds three FPDUs
			u, err := r.ReadFPDU(make([]byte, 64))
			if err != nil {
				fmt.Print(" [", errors.Is(err, mpa.ErrCRC), "]")
				continue
			}
			fmt.Printf(" %s", u[2:])
		}
		fmt.Println()
	}
	// Output:
	// continue false: [true] [true] [true]
	// continue true: [true] two three
}

// Peer-to-peer mode (RFC 6581 §9.2): a responder that accepts none of the
// RTR types offered names one it accepts, and an initiator that can send
// it uses it although it did not offer it.
func Example_peerToPeer() {
	ini := &mpa.Config{P2P: true, RTR: mpa.RTRSend, IRD: 4, ORD: 4}
	req, _ := mpa.BuildRequest(ini, nil)
	rep, resp, _ := mpa.AnswerRequest(&mpa.Config{RTR: mpa.RTRWrite | mpa.RTRRead, IRD: 4, ORD: 4}, &req, nil)
	res, err := mpa.CheckReply(ini, &req, &rep)
	fmt.Println("offered", req.IRDORD.RTR, "named", rep.IRDORD.RTR, "initiator sends", res.RTR, err)
	fmt.Println("responder waits for it:", resp.P2P, resp.WaitForPeerFPDU)

	// One that can only send what it offered terminates with error 0x07.
	ini.SendableRTR = mpa.RTRSend
	_, err = mpa.CheckReply(ini, &req, &rep)
	var c termcode.Code
	fmt.Println(errors.As(err, &c), errors.Is(err, mpa.ErrNoMatchingRTR), fmt.Sprintf("0x%04x", uint16(c)))
	// Output:
	// offered Send named Write initiator sends Write <nil>
	// responder waits for it: true true
	// true true 0x2007
}
