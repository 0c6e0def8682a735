package conn_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// A server exposes a region for RDMA Write and Read; a client writes into
// it, reads it back and tells the server with a Send that it is done.
func Example_writeRead() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Server: a region the peer may write and read, a receive for the
	// client's "done" message, and a listener.
	spd := conn.NewPD()
	scq := conn.NewCQ(16)
	sqp, _ := spd.NewQP(scq, conn.QPCaps{})
	target, _ := spd.Register(make([]byte, 64), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	note, _ := spd.Register(make([]byte, 16), conn.LocalWrite)
	sqp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{note.SGE(0, 16)}})
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()

	// Client.
	cpd := conn.NewPD()
	ccq := conn.NewCQ(16)
	cqp, _ := cpd.NewQP(ccq, conn.QPCaps{})
	if err := cqp.Connect(ctx, "tcp", ln.Addr().String()); err != nil {
		log.Fatal(err)
	}
	if err := <-accepted; err != nil {
		log.Fatal(err)
	}
	buf, _ := cpd.Register(make([]byte, 64), conn.LocalWrite)
	copy(buf.Bytes(), "hello, remote memory")
	remote := target.Remote(0) // in a real program this travels in a message

	cqp.PostSend(conn.SendWR{ID: 1, Op: conn.OpWrite, Flags: conn.Signaled,
		SGL: []conn.SGE{buf.SGE(0, 20)}, Remote: remote})
	cqp.PostSend(conn.SendWR{ID: 2, Op: conn.OpRead, Flags: conn.Signaled,
		SGL: []conn.SGE{buf.SGE(32, 20)}, Remote: remote})
	cqp.PostSend(conn.SendWR{ID: 3, Op: conn.OpSend, Flags: conn.Signaled})

	wcs := make([]conn.WorkCompletion, 4)
	for done := 0; done < 3; {
		n, err := ccq.Wait(ctx, wcs)
		if err != nil {
			log.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			fmt.Println("client:", wc.Op, wc.ByteLen, wc.Status)
		}
		done += n
	}
	fmt.Printf("read back: %s\n", buf.Bytes()[32:52])

	// The Send arrives after the Write, so the server may now look.
	n, _ := scq.Wait(ctx, wcs)
	fmt.Println("server:", wcs[0].Op, n)
	fmt.Printf("server memory: %s\n", target.Bytes()[:20])

	cqp.Close()
	sqp.Close()
	// Output:
	// client: rdma-write 20 success
	// client: rdma-read 20 success
	// client: send 0 success
	// read back: hello, remote memory
	// server: recv 1
	// server memory: hello, remote memory
}

// Send and Receive: the receiver posts a buffer before the sender sends.
func Example_sendRecv() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	spd := conn.NewPD()
	scq := conn.NewCQ(16)
	sqp, _ := spd.NewQP(scq, conn.QPCaps{})
	rbuf, _ := spd.Register(make([]byte, 128), conn.LocalWrite)
	// Receives may be posted before the connection exists.
	sqp.PostRecv(conn.RecvWR{ID: 42, SGL: []conn.SGE{rbuf.SGE(0, 128)}})
	go ln.Accept(ctx, sqp)

	cpd := conn.NewPD()
	ccq := conn.NewCQ(16)
	qp, err := conn.Dial(ctx, "tcp", ln.Addr().String(), cpd, ccq, conn.QPCaps{})
	if err != nil {
		log.Fatal(err)
	}
	msg, _ := cpd.Register([]byte("ping over iWARP"), 0)
	qp.PostSend(conn.SendWR{ID: 1, Op: conn.OpSend, SGL: []conn.SGE{msg.SGE(0, msg.Len())}})

	wcs := make([]conn.WorkCompletion, 1)
	if _, err := scq.Wait(ctx, wcs); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wr %d: %d bytes: %s\n", wcs[0].ID, wcs[0].ByteLen, rbuf.Bytes()[:wcs[0].ByteLen])
	qp.Close()
	sqp.Close()
	// Output:
	// wr 42: 15 bytes: ping over iWARP
}

// A server inspects the private data of each connection request and
// accepts or rejects it.
func Example_acceptWithPrivateData() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	pd := conn.NewPD()
	cq := conn.NewCQ(16)
	go func() {
		for i := 0; i < 2; i++ {
			req, err := ln.AcceptRequest(ctx)
			if err != nil {
				return
			}
			if string(req.PrivateData()) != "token=secret" {
				req.Reject(ctx, []byte("bad token"))
				continue
			}
			qp, _ := pd.NewQP(cq, conn.QPCaps{})
			req.Accept(ctx, qp, conn.WithPrivateData([]byte("welcome")))
			<-qp.Done() // serve until the client leaves
			qp.Close()
		}
	}()

	for _, token := range []string{"token=wrong", "token=secret"} {
		qp, err := conn.Dial(ctx, "tcp", ln.Addr().String(), conn.NewPD(), conn.NewCQ(4), conn.QPCaps{},
			conn.WithPrivateData([]byte(token)))
		if err != nil {
			fmt.Println("rejected:", err)
			continue
		}
		fmt.Printf("accepted: %s\n", qp.Negotiated().PeerPrivateData)
		qp.Close()
	}
	// Output:
	// rejected: iwarp: connection setup: mpa: connection rejected by the peer (private data "bad token")
	// accepted: welcome
}
