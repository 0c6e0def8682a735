package main

import (
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// The subcommands, as "iwarp-peer help" lists them.
func Example() {
	run([]string{"help"}, os.Stdout, os.Stdout)
	// Output:
	// usage: iwarp-peer <command> [arguments]
	//
	//   bench    bandwidth and latency between two iwarp-go peers, beside raw Go TCP
	//   decode   print the iWARP dissection of a pcap or pcapng capture
	//   demo     client and server over loopback: Send/Receive, RDMA Write and Read, every byte verified
	//   iwtest   the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server
	//   mpa-demo walk through MPA connection setup and FPDU framing over loopback TCP
	//   perftest perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server
	//   rping    rping-compatible client and server (rdma-core's rping over siw)
	//
	// Run 'iwarp-peer <command> -h' for a command's flags.
}

// An rping server and three pings of its client with -v, the lines
// rdma-core's rping prints for them.
func Example_rping() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listening := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() {
		served <- rping(ctx, []string{"-s", "-a", "127.0.0.1", "-p", "0"}, io.Discard, io.Discard,
			func(a net.Addr) { listening <- a })
	}()
	port := (<-listening).(*net.TCPAddr).Port
	rping(ctx, []string{"-c", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-C", "3", "-S", "40", "-v", "-V"},
		os.Stdout, io.Discard, nil)
	<-served
	// Output:
	// ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ
	// ping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[
	// ping data: rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\
}
