package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
	"github.com/iwarp-go/iwarp-go/internal/progress"
)

func statUsage(w io.Writer) {
	fmt.Fprint(w, `usage: iwarp-peer stat [--once] [--interval D] ADDR

The live queue pairs of an iwarp-peer started with --metrics ADDR, a row each,
refreshed every second until interrupted: FPDUs and bytes each way and their rates
since the last refresh, the peer's Read Requests taken (READS IN, bounded by the IRD)
and this side's issued (READS OUT, bounded by the ORD), Terminates and CRC errors.
Above the table: the device's totals (closed queue pairs included) and what each
listener turned away.
`)
}

func runStat(ctx context.Context, args []string, std stdio) error {
	var once bool
	var interval time.Duration
	f := newFlags("stat", std, statUsage, true)
	f.BoolVar(&once, "once", false, "print the table once and exit")
	f.DurationVar(&interval, "interval", time.Second, "time between refreshes")
	if err := f.parse(args); err != nil {
		return err
	}
	switch {
	case f.NArg() != 1:
		return f.bad("give the ADDR of one --metrics endpoint")
	case interval <= 0:
		return f.bad("--interval %v: want a positive duration", interval)
	}
	w := &metricshttp.Watch{Addr: f.Arg(0), Out: std.out, Interval: interval, Once: once, Clear: !once && progress.IsTerminal(std.out)}
	return w.Run(ctx)
}
