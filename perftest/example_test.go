package perftest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/perftest"
)

// A Go service measured with perftest: it serves ib_write_bw -R clients
// from its own listener and protection domain, one client at a time, so
// that
//
//	ib_write_bw -R -s 4096 -n 100 -p PORT HOST
//
// on a machine with an iWARP device (siw) benchmarks the service's
// iwarp-go stack. Here the client is this package, run in-process.
func ExampleServe() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The service's listener and protection domain.
	pd := conn.NewPD()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	cfg := perftest.Config{Test: perftest.WriteBW, Size: 4096, Iters: 100}
	served := make(chan []perftest.Result, 1)
	go func() {
		// A service would loop here, one perftest client after another.
		rows, err := perftest.Serve(ctx, ln, pd, cfg)
		if err != nil {
			log.Print(err)
		}
		served <- rows
	}()

	rows, err := perftest.Dial(ctx, ln.Addr().String(), conn.NewPD(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("client: %d messages of %d bytes\n", rows[0].Iters(), rows[0].Size())
	srv := <-served
	fmt.Printf("server: the client's report of %d messages\n", srv[0].Iters())
	// Output:
	// client: 100 messages of 4096 bytes
	// server: the client's report of 100 messages
}

// The other direction: a Go program as the client of a perftest server,
// such as ib_read_lat -R started on a siw machine. Output receives the
// same text perftest prints.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0") // stands in for the perftest server
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	cfg := perftest.Config{Test: perftest.ReadLat, Size: 64, Iters: 500}
	served := make(chan error, 1)
	go func() {
		_, err := perftest.Serve(ctx, ln, conn.NewPD(), cfg)
		served <- err
	}()

	rows, err := perftest.Dial(ctx, ln.Addr().String(), conn.NewPD(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	r := rows[0].Lat
	fmt.Println(r.Iters, r.TMin <= r.TTypical && r.TTypical <= r.TMax)
	// Output:
	// 500 true
}
