package conn_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// A server's queue pairs share one receive queue: the receives posted to
// it serve Sends from any client, and the limit event says when to post
// more.
func ExampleSRQ() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Server: one SRQ with four receives for all its connections; an event
	// when fewer than three are left.
	spd := conn.NewPD()
	scq := conn.NewCQ(16)
	srq, err := spd.NewSRQ(conn.SRQCaps{Depth: 4, MaxSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	bufs, _ := spd.Register(make([]byte, 4*32), conn.LocalWrite)
	for i := range 4 {
		srq.PostRecv(conn.RecvWR{ID: uint64(i), SGL: []conn.SGE{bufs.SGE(i*32, 32)}})
	}
	srq.Arm(3)
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	// Two clients, each accepted into a queue pair bound to the SRQ.
	var servers, clients []*conn.QP
	for range 2 {
		sqp, _ := spd.NewQP(scq, conn.QPCaps{SRQ: srq})
		accepted := make(chan error, 1)
		go func() { accepted <- ln.Accept(ctx, sqp) }()
		cpd := conn.NewPD()
		cqp, _ := cpd.NewQP(conn.NewCQ(16), conn.QPCaps{})
		if err := cqp.Connect(ctx, "tcp", ln.Addr().String()); err != nil {
			log.Fatal(err)
		}
		if err := <-accepted; err != nil {
			log.Fatal(err)
		}
		servers, clients = append(servers, sqp), append(clients, cqp)
	}
	fmt.Println("own PostRecv:", servers[0].PostRecv(conn.RecvWR{}) == conn.ErrQPUsesSRQ)

	// Each client sends one message; the server learns from the
	// completion's QPN which connection it came from.
	for i, cqp := range clients {
		msg, _ := cqp.PD().Register([]byte(fmt.Sprintf("hello from client %d", i)), 0)
		cqp.PostSend(conn.SendWR{Op: conn.OpSend, SGL: []conn.SGE{msg.SGE(0, msg.Len())}})
		wcs := make([]conn.WorkCompletion, 1)
		if _, err := scq.Wait(ctx, wcs); err != nil {
			log.Fatal(err)
		}
		wc := wcs[0]
		from := 0
		if wc.QPN == servers[1].QPN() {
			from = 1
		}
		off := int(wc.ID) * 32
		fmt.Printf("receive %d on connection %d: %s\n", wc.ID, from, bufs.Bytes()[off:off+int(wc.ByteLen)])
	}
	select {
	case <-srq.LimitReached():
		fmt.Println("limit reached:", srq.Len(), "receives left")
	default:
	}

	for i := range clients {
		clients[i].Close()
		servers[i].Close()
	}
	fmt.Println("SRQ closed:", srq.Close())
	// Output:
	// own PostRecv: true
	// receive 0 on connection 0: hello from client 0
	// receive 1 on connection 1: hello from client 1
	// limit reached: 2 receives left
	// SRQ closed: <nil>
}
