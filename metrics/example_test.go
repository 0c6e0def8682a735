package metrics_test

import (
	"context"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/metrics"
)

func ExampleSource() {
	ln, err := conn.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	dev, err := conn.NewDevice()
	if err != nil {
		panic(err)
	}
	// A device (nil: conn.DefaultDevice(), which conn.NewPD uses) and a
	// listener; AddListener adds more later.
	src := metrics.NewSource(dev, ln)
	r := src.Report(false) // true: each live queue pair's counters too
	fmt.Println(r.Device.Connections, "connections")
	for _, reason := range metrics.RefusalReasons {
		fmt.Println(reason.Label, r.Listeners[0].Refused[reason.Label])
	}
	// Output:
	// 0 connections
	// too_many_handshakes 0
	// max_connections 0
	// address_blocked 0
	// bad_request 0
	// backlog_full 0
	// initiator_gone 0
	// expired 0
	// rejected 0
	// tls_failed 0
	// tls_required 0
}
