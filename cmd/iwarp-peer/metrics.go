package main

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/internal/metricshttp"
)

// metricsUsage describes the flags, for usages written by hand.
const metricsUsage = `metrics options:
      --metrics ADDR      serve Prometheus text at http://ADDR/metrics and the queue pairs for
                          'iwarp-peer stat ADDR' (host:port; port 0 picks one, printed on stderr)
      --metrics-qps       per-queue-pair series (iwarp_qp_*, by qpn and remote) in /metrics too
`

// metrics registers --metrics and --metrics-qps (metricshttp.Flags);
// parse checks them. Where the command starts, it opens the endpoint
// (srv, err := serveMetrics(m, name, std); nil without --metrics), defers
// srv.Close() and gives its listener, if any, to srv.AddListener.
func (f *flags) metrics() *metricshttp.Flags {
	m := &metricshttp.Flags{}
	m.Register(f.FlagSet)
	f.checks = append(f.checks, m.Check)
	return m
}

// serveMetrics opens the endpoint and says where it is.
func serveMetrics(m *metricshttp.Flags, name string, std stdio) (*metricshttp.Server, error) {
	srv, err := m.Open()
	if srv != nil {
		fmt.Fprintf(std.err, "iwarp-peer %s: metrics at http://%v/metrics\n", name, srv.Addr())
	}
	return srv, err
}
