package iwarpprom_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/metrics/iwarpprom"
)

func ExampleNewCollector() {
	dev, err := conn.NewDevice() // or conn.DefaultDevice(), the one conn.NewPD uses
	if err != nil {
		panic(err)
	}
	src := metrics.NewSource(dev) // src.AddListener(ln) for each listener to report
	reg := prometheus.NewRegistry()
	reg.MustRegister(iwarpprom.NewCollector(src)) // iwarpprom.PerQueuePair() adds iwarp_qp_ series
	// Serve it: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		fmt.Println(mf.GetName(), len(mf.GetMetric()))
	}
	// Output:
	// iwarp_bytes_received_total 8
	// iwarp_bytes_sent_total 8
	// iwarp_connections_closed_total 1
	// iwarp_connections_open 1
	// iwarp_connections_total 1
	// iwarp_crc_errors_total 1
	// iwarp_fpdus_received_total 8
	// iwarp_fpdus_sent_total 8
	// iwarp_reads_held_total 1
	// iwarp_reads_issued_total 1
	// iwarp_reads_queued_total 1
	// iwarp_rejects_received_total 1
	// iwarp_setup_seconds_total 1
}
