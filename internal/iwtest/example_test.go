package iwtest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/iwtest"
)

// An iwtest server and a client over loopback: the client drives a Send
// and an RDMA Read of 64 bytes in both directions and prints what it saw.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := func() *iwtest.Config {
		return &iwtest.Config{Addr: "127.0.0.1", Iters: 1, Dirs: iwtest.Both, SGEs: 4, Timeout: 30 * time.Second,
			Wait: 30 * time.Second, IRD: 16, ORD: 16, PeerIRD: 1, Out: io.Discard, Err: io.Discard}
	}
	listening := make(chan net.Addr, 1)
	served := make(chan error, 1)
	srv := cfg()
	srv.Sizes, srv.Ready = []uint32{4096}, func(a net.Addr) { listening <- a }
	go func() { served <- iwtest.Serve(ctx, srv) }()
	cli := cfg()
	cli.Port = (<-listening).(*net.TCPAddr).Port
	cli.Tests, cli.Sizes, cli.Out = []iwtest.Test{iwtest.TestSend, iwtest.TestRead}, []uint32{64}, os.Stdout
	err := iwtest.Client(ctx, cli)
	fmt.Println("client:", err, "server:", <-served)
	// Output:
	// ESTABLISHED role=client ird=16 ord=16 private_data_len=0 private_data=- text="" mpa_rev=2 enhanced=yes crc=on p2p=write
	// RESULT role=client test=send dir=c2s size=64 iters=1 status=ok
	// RESULT role=client test=send dir=s2c size=64 iters=1 status=ok
	// RESULT role=client test=read dir=c2s size=64 iters=1 status=ok
	// RESULT role=client test=read dir=s2c size=64 iters=1 status=ok
	// SUMMARY role=client ok=4 failed=0
	// client: <nil> server: <nil>
}
