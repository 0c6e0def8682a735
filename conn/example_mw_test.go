package conn_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// A server lends its peer 16 bytes of a larger region through a type 2
// memory window bound on the connection's send queue; the peer writes
// into it and hands it back with a Send with Invalidate, after which the
// window's STag names nothing.
func Example_memoryWindow() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	spd := conn.NewPD()
	scq := conn.NewCQ(16)
	sqp, _ := spd.NewQP(scq, conn.QPCaps{})
	mem := []byte("................................")
	region, _ := spd.Register(mem, conn.LocalWrite|conn.RemoteWrite|conn.MWBind)
	mw, _ := spd.AllocMW(conn.MWType2)
	sqp.PostRecv(conn.RecvWR{ID: 1}) // for the Send with Invalidate
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

	wcs := make([]conn.WorkCompletion, 1)
	wait := func(cq *conn.CQ) conn.WorkCompletion {
		if _, err := cq.Wait(ctx, wcs); err != nil || wcs[0].Err() != nil {
			log.Fatal(err, wcs[0].Err())
		}
		return wcs[0]
	}
	// Bytes [8, 24) of the region, writable by this connection's peer
	// only, addressed from TO 0.
	sqp.PostSend(conn.SendWR{Op: conn.OpBindMW, Flags: conn.Signaled, MW: mw, Bind: conn.BindInfo{
		MR: region, Offset: 8, Length: 16, Access: conn.RemoteWrite, ZeroBased: true, Key: mw.STag().Key() + 1}})
	fmt.Println("server:", wait(scq).Op, "bound:", mw.Bound())
	lent := mw.Remote(0) // sent to the peer out of band

	src, _ := cpd.Register([]byte("hello, window!"), 0)
	cqp.PostSend(conn.SendWR{Op: conn.OpWrite, SGL: []conn.SGE{src.SGE(0, src.Len())}, Remote: lent})
	cqp.PostSend(conn.SendWR{Op: conn.OpSendInv, Flags: conn.Signaled, InvSTag: lent.STag})
	wait(ccq)
	wc := wait(scq)
	fmt.Println("server: receive with invalidate:", wc.Flags&conn.WCWithInv != 0, "bound:", mw.Bound())
	fmt.Printf("server: region %q\n", mem)
	// Output:
	// server: bind-mw bound: true
	// server: receive with invalidate: true bound: false
	// server: region "........hello, window!.........."
}
