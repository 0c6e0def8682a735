package metricshttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/iwarp-go/iwarp-go/metrics"
)

// Watch is a live table of an endpoint's queue pairs, as "iwarp-peer
// stat" shows it.
type Watch struct {
	// Addr is the endpoint, as Fetch takes it.
	Addr string
	// Out receives the tables; Interval is the time between them.
	Out      io.Writer
	Interval time.Duration
	// Once prints one table and returns.
	Once bool
	// Clear clears the screen before each table (Out is a terminal);
	// without it the tables follow each other, a blank line between.
	Clear bool
}

// Run fetches the report and prints its table every Interval, each with
// the rates since the one before, until ctx ends, which is the normal end
// of a live table: Run then returns nil. A failed fetch ends it with the
// error.
func (w *Watch) Run(ctx context.Context) error {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var prev *metrics.Report
	var prevAt time.Time
	for {
		r, err := Fetch(ctx, client, w.Addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a live table
			}
			return err
		}
		now := time.Now()
		switch {
		case w.Clear:
			fmt.Fprint(w.Out, "\x1b[H\x1b[2J")
		case prev != nil:
			fmt.Fprintln(w.Out)
		}
		if err := Table(w.Out, r, prev, now.Sub(prevAt)); err != nil || w.Once {
			return err
		}
		prev, prevAt = r, now
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.Interval):
		}
	}
}
