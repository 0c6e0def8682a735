package main

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
	"github.com/iwarp-go/iwarp-go/metrics"
)

// metricsFlag is --metrics ADDR: Prometheus text at http://ADDR/metrics,
// and the JSON report with every live queue pair that "iwarp-peer stat
// ADDR" reads. A command registers it with its flags (m := f.metrics());
// where it starts, it opens the endpoint (srv, err := m.serve(name, std);
// nil without --metrics), defers srv.Close() and gives its listener, if
// any, to srv.AddListener.
type metricsFlag struct {
	addr  string
	perQP bool
}

// metricsUsage describes the flags, for usages written by hand.
const metricsUsage = `metrics options:
      --metrics ADDR      serve Prometheus text at http://ADDR/metrics and the queue pairs for
                          'iwarp-peer stat ADDR' (host:port; port 0 picks one, printed on stderr)
      --metrics-qps       per-queue-pair series (iwarp_qp_*, by qpn and remote) in /metrics too
`

// metrics registers --metrics and --metrics-qps; parse checks them.
func (f *flags) metrics() *metricsFlag {
	m := &metricsFlag{}
	f.StringVar(&m.addr, "metrics", "", "serve Prometheus text at http://`ADDR`/metrics and the queue pairs for 'iwarp-peer stat ADDR'")
	f.BoolVar(&m.perQP, "metrics-qps", false, "with --metrics: per-queue-pair series in /metrics too")
	f.metricsFlag = m
	return m
}

// serve opens the endpoint over conn's default device, the one the
// commands' queue pairs belong to, and says where it is.
func (m *metricsFlag) serve(name string, std stdio) (*metricshttp.Server, error) {
	if m.addr == "" {
		return nil, nil
	}
	srv, err := metricshttp.Serve(m.addr, metrics.NewSource(conn.DefaultDevice()), m.perQP)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	fmt.Fprintf(std.err, "iwarp-peer %s: metrics at http://%v/metrics\n", name, srv.Addr())
	return srv, nil
}
