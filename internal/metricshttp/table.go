package metricshttp

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/units"
	"github.com/iwarp-go/iwarp-go/metrics"
)

// Table prints r as stat shows it: the device's totals, each listener's
// refusals, and a row per live queue pair. With prev, the report of
// elapsed earlier, the rows also show each queue pair's rates since.
func Table(w io.Writer, r, prev *metrics.Report, elapsed time.Duration) error {
	d := &r.Device
	fs, fr := d.FPDUs()
	bs, br := d.Bytes()
	ts, tr := d.Terminates()
	fmt.Fprintf(w, "device: %d connections, %d open; sent %d FPDUs, %s; received %d FPDUs, %s; %d CRC errors; Terminates %d sent, %d received\n",
		d.Connections, d.Connections-min(d.Closed, d.Connections), fs, units.Bytes(int64(bs)), fr, units.Bytes(int64(br)), d.CRCErrors, ts, tr)
	for _, l := range r.Listeners {
		var refused uint64
		var why []string
		for _, reason := range metrics.RefusalReasons {
			if n := l.Refused[reason.Label]; n > 0 {
				refused += n
				why = append(why, fmt.Sprintf("%s %d", reason.Label, n))
			}
		}
		fmt.Fprintf(w, "listener %s: %d accepted, %d refused", l.Addr, l.Accepted, refused)
		if len(why) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(why, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, s := range r.Sinks {
		durable := "not durable"
		if s.Durable {
			durable = "durable"
		}
		mean := "-"
		if s.Persists > 0 {
			mean = time.Duration(s.PersistSeconds / float64(s.Persists) * 1e9).String()
		}
		fmt.Fprintf(w, "sink %s: %s (%s); %d persists of %s, mean %s; %d persist errors\n",
			s.Name, s.Mode, durable, s.Persists, units.Bytes(int64(s.BytesPersisted)), mean, s.PersistErrors)
	}
	if len(r.QueuePairs) == 0 {
		_, err := fmt.Fprintln(w, "no live queue pairs")
		return err
	}
	var before map[uint32]*metrics.QueuePair
	if prev != nil && elapsed > 0 {
		before = make(map[uint32]*metrics.QueuePair, len(prev.QueuePairs))
		for i := range prev.QueuePairs {
			before[prev.QueuePairs[i].QPN] = &prev.QueuePairs[i]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"QPN", "REMOTE", "FPDUS OUT", "FPDUS IN", "BYTES OUT", "BYTES IN", "RATE OUT", "RATE IN",
		"READS IN", "READS OUT", "IRD", "ORD", "TERM OUT", "TERM IN", "CRC ERR"}
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for i := range r.QueuePairs {
		q := &r.QueuePairs[i]
		fs, fr := q.FPDUs()
		bs, br := q.Bytes()
		ts, tr := q.Terminates()
		rateOut, rateIn := "-", "-"
		if p, ok := before[q.QPN]; ok {
			ps, pr := p.Bytes()
			rateOut, rateIn = units.Rate(int64(bs-min(ps, bs)), elapsed), units.Rate(int64(br-min(pr, br)), elapsed)
		}
		row := []any{q.QPN, q.Remote, fs, fr, units.Bytes(int64(bs)), units.Bytes(int64(br)), rateOut, rateIn,
			q.ReadsQueued, q.ReadsIssued, q.IRD, q.ORD, ts, tr, q.CRCErrors}
		fmt.Fprintf(tw, strings.Repeat("%v\t", len(row))+"\n", row...)
	}
	return tw.Flush()
}
