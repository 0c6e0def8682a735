// Command iwlab-agent is the guest half of the siw lab: the initramfs runs
// it with the 9p share mounted, and it executes the jobs the host drops
// there (see package lab). It exits when the host asks for a power-off.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

func main() {
	share := flag.String("share", lab.GuestShare, "directory of the share")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := lab.ServeAgent(ctx, *share, lab.AgentOptions{Log: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "iwlab-agent:", err)
		os.Exit(1)
	}
}
