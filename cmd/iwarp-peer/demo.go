package main

import (
	"context"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/internal/connlog"
	"github.com/iwarp-go/iwarp-go/internal/demo"
)

func runDemo(ctx context.Context, args []string, std stdio) error {
	var cfg demo.Config
	f := newFlags("demo", std, func(w io.Writer) {
		fmt.Fprintln(w, "usage: iwarp-peer demo [--pcap FILE]")
		fmt.Fprintln(w, "An iWARP client and server in this process over loopback TCP: Send/Receive, RDMA Write and Read, a durable write into a pmemsink region, every byte verified.")
	}, true)
	f.StringVar(&cfg.Pcap, "pcap", "", "record the client's connection into this pcap `file`")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	cfg.Out, cfg.Options = std.out, connlog.Options(ctx)
	return demo.Run(ctx, cfg)
}
