package main

import (
	"context"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/internal/demo"
)

func runMPADemo(ctx context.Context, args []string, std stdio) error {
	f := newFlags("mpa-demo", std, func(w io.Writer) {
		fmt.Fprintln(w, "usage: iwarp-peer mpa-demo")
		fmt.Fprintln(w, "Runs an MPA initiator and responder in this process over loopback TCP and explains each step.")
	}, false)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	return demo.MPA(ctx, std.out)
}
