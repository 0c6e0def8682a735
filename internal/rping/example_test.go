package rping_test

import (
	"context"
	"io"
	"net"
	"os"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/rping"
)

// A server and three pings of its client with -v and -V: the lines
// rdma-core's rping prints for them.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listening := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() {
		served <- rping.Serve(ctx, &rping.Config{Addr: "127.0.0.1", Size: 40, Out: io.Discard, Err: io.Discard,
			Ready: func(a net.Addr) { listening <- a }})
	}()
	port := (<-listening).(*net.TCPAddr).Port
	rping.Client(ctx, &rping.Config{Addr: "127.0.0.1", Port: port, Count: 3, Size: 40, Verbose: true, Validate: true,
		Out: os.Stdout, Err: io.Discard})
	<-served
	// Output:
	// ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ
	// ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[
	// ping data: rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\
}
