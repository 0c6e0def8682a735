package pcaptap_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/pcaptap"
)

// Record a connection with conn.WithTap, then read the capture back. The
// same file opens in Wireshark.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var capture bytes.Buffer // usually an *os.File
	tap, err := pcaptap.New(&capture)
	if err != nil {
		log.Fatal(err)
	}

	spd, scq := conn.NewPD(), conn.NewCQ(4)
	sqp, _ := spd.NewQP(scq, conn.QPCaps{})
	inbox, _ := spd.Register(make([]byte, 64), conn.LocalWrite)
	sqp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{inbox.SGE(0, 64)}})
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go ln.Accept(ctx, sqp)

	cpd := conn.NewPD()
	qp, err := conn.Dial(ctx, "tcp", ln.Addr().String(), cpd, conn.NewCQ(4), conn.QPCaps{},
		conn.WithTap(tap), conn.WithCRC(conn.CRCRequired))
	if err != nil {
		log.Fatal(err)
	}
	msg, _ := cpd.Register([]byte("hello"), 0)
	qp.PostSend(conn.SendWR{ID: 1, Op: conn.OpSend, SGL: []conn.SGE{msg.SGE(0, 5)}})
	wcs := make([]conn.WorkCompletion, 1)
	if _, err := scq.Wait(ctx, wcs); err != nil {
		log.Fatal(err)
	}
	qp.Close()
	sqp.Close()
	if err := tap.Close(); err != nil {
		log.Fatal(err)
	}

	d, err := dissect.Decode(&capture)
	if err != nil {
		log.Fatal(err)
	}
	s := d.Streams[0]
	fmt.Println("MPA", s.State, "CRC", s.Directions[dissect.Up].CRC)
	for _, p := range s.PDUs {
		fmt.Println(p.Dir, p.Op, p.PayloadLen, "octets, CRC", p.CRC)
	}
	// Output:
	// MPA established CRC true
	// up RDMA Write 0 octets, CRC good
	// up Send 5 octets, CRC good
}
