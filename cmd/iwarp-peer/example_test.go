package main

import (
	"context"
	"os"
)

// The subcommands, as "iwarp-peer -h" lists them.
func Example() {
	run(context.Background(), []string{"-h"}, stdio{os.Stdout, os.Stderr})
	// Output:
	// usage: iwarp-peer [-d] <command> [arguments]
	//
	//   -d        trace connections on stderr: setup, Terminates, teardown (log/slog)
	//
	//   bench     bandwidth and latency between two iwarp-go peers, beside raw Go TCP
	//   decode    print the iWARP dissection of a pcap or pcapng capture
	//   demo      client and server over loopback: Send/Receive, RDMA Write and Read, a durable write, every byte verified
	//   get       read bytes of a sink's region to stdout
	//   iwtest    the iwtest RDMA test peer (interop/siw/cprog/PROTOCOL.md), client or server
	//   mpa-demo  walk through MPA connection setup and FPDU framing over loopback TCP
	//   perftest  perftest's ib_*_bw/ib_*_lat over rdma_cm (-R), client or server
	//   put       write a file into a sink's region and make it durable
	//   rping     rping-compatible client and server (rdma-core's rping over siw)
	//   sink      serve a file as remote persistent memory (iwarp-go and librpma initiators)
	//   stat      a live table of the queue pairs of an iwarp-peer running with --metrics
	//
	// Run 'iwarp-peer <command> -h' for a command's flags.
}
