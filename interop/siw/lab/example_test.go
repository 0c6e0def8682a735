package lab_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// The guest agent and its host client on one machine: the agent serves a
// directory (in the VM, the 9p share) and the host runs a job through it.
func ExampleServeAgent() {
	share, _ := os.MkdirTemp("", "share")
	defer os.RemoveAll(share)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lab.ServeAgent(ctx, share, lab.AgentOptions{}) }()
	defer func() { cancel(); <-done }()

	g := lab.NewGuest(share, nil)
	res, err := g.Run(ctx, 10*time.Second, "hello", "echo hello from the guest; exit 3")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Stdout)
	fmt.Println("exit", res.Code)
	// Output:
	// hello from the guest
	// exit 3
}

// A scenario against the real siw peer (needs interop/siw/run.sh build
// and QEMU; the interop-tagged tests do this).
func ExampleBoot() {
	cfg, err := lab.ConfigFromEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	vm, err := lab.Boot(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer vm.Shutdown(ctx)

	srv, err := vm.StartListening(ctx, time.Minute, "rping-s", "exec rping -s -a 10.0.2.15 -C 3", 7174)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := vm.Run(ctx, time.Minute, "rping-c", "exec rping -c -a 10.0.2.15 -C 3 -v")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("client exit", res.Code)
	sres, _ := srv.Wait(ctx, time.Minute)
	fmt.Println("server exit", sres.Code)
	hostAddr, _ := vm.HostAddr(7174) // where a host-side peer would connect
	_ = hostAddr
}
