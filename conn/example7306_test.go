package conn_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Two iwarp-go peers share a counter through RFC 7306 atomics: the client
// adds to a word of the server's region and swaps it, each time receiving
// the previous value, then tells the server with immediate data.
func Example_atomics() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	spd := conn.NewPD()
	scq := conn.NewCQ(16)
	sqp, _ := spd.NewQP(scq, conn.QPCaps{})
	counter, _ := spd.Register(make([]byte, 8), conn.LocalWrite|conn.RemoteAtomic)
	sqp.PostRecv(conn.RecvWR{ID: 1}) // for the immediate data
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()

	cpd := conn.NewPD()
	ccq := conn.NewCQ(16)
	cqp, _ := cpd.NewQP(ccq, conn.QPCaps{})
	if err := cqp.Connect(ctx, "tcp", ln.Addr().String()); err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	defer cqp.Close()
	defer sqp.Close()
	fmt.Println("peer accepts atomics:", cqp.PeerAtomics())

	old, _ := cpd.Register(make([]byte, 8), conn.LocalWrite)
	wcs := make([]conn.WorkCompletion, 1)
	do := func(op conn.Op, a conn.AtomicArgs) uint64 {
		cqp.PostSend(conn.SendWR{Op: op, Flags: conn.Signaled, SGL: []conn.SGE{old.SGE(0, 8)}, Remote: counter.Remote(0), Atomic: a})
		if _, err := ccq.Wait(ctx, wcs); err != nil || wcs[0].Err() != nil {
			log.Fatal(err, wcs[0].Err())
		}
		return old.LoadUint64(0)
	}
	fmt.Println("fetch-add 5, was", do(conn.OpFetchAdd, conn.FetchAdd(5)))
	fmt.Println("fetch-add 3, was", do(conn.OpFetchAdd, conn.FetchAdd(3)))
	fmt.Println("swap 8 for 100, was", do(conn.OpCmpSwap, conn.CmpSwap(8, 100)))

	cqp.PostSend(conn.SendWR{Op: conn.OpSendImm, Imm: 3})
	if _, err := scq.Wait(ctx, wcs); err != nil {
		log.Fatal(err)
	}
	// The immediate's receive completion orders the atomics before it.
	fmt.Println("server: immediate", wcs[0].Imm, wcs[0].Flags&conn.WCWithImm != 0, "counter", counter.LoadUint64(0))
	// Output:
	// peer accepts atomics: true
	// fetch-add 5, was 0
	// fetch-add 3, was 5
	// swap 8 for 100, was 8
	// server: immediate 3 true counter 100
}
