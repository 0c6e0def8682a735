package main

import (
	"context"
	"os"
)

// The subcommands, as "iwarp-peer -h" lists them.
func Example() {
	run(context.Background(), []string{"-h"}, stdio{os.Stdout, os.Stderr})
	// Output:
	// usage: iwarp-peer <command> [arguments]
	//
	//   bench     bandwidth and latency between two iwarp-go peers, beside raw Go TCP
	//   decode    print the iWARP dissection of a pcap or pcapng capture
	//   demo      client and server over loopback: Send/Receive, RDMA Write and Read, every byte verified
	//   iwtest    the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server
	//   mpa-demo  walk through MPA connection setup and FPDU framing over loopback TCP
	//   perftest  perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server
	//   rping     rping-compatible client and server (rdma-core's rping over siw)
	//
	// Run 'iwarp-peer <command> -h' for a command's flags.
}
