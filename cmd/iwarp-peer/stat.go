package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
	"github.com/iwarp-go/iwarp-go/internal/progress"
	"github.com/iwarp-go/iwarp-go/metrics"
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
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	clearScreen := !once && progress.IsTerminal(std.out)
	var prev *metrics.Report
	var prevAt time.Time
	for {
		r, err := metricshttp.Fetch(ctx, client, f.Arg(0))
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a live table
			}
			return err
		}
		now := time.Now()
		switch {
		case clearScreen:
			fmt.Fprint(std.out, "\x1b[H\x1b[2J")
		case prev != nil:
			fmt.Fprintln(std.out)
		}
		if err := metricshttp.Table(std.out, r, prev, now.Sub(prevAt)); err != nil || once {
			return err
		}
		prev, prevAt = r, now
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
