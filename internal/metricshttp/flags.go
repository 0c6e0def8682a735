package metricshttp

import (
	"errors"
	"flag"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/metrics"
)

// Flags are a command's --metrics ADDR (Prometheus text at
// http://ADDR/metrics, and the JSON report with every live queue pair
// that "iwarp-peer stat ADDR" reads) and --metrics-qps. A command
// registers them with its flags, checks them after parsing, and where it
// starts opens the endpoint (Open), defers Close and gives its listener,
// if any, to AddListener.
type Flags struct {
	Addr  string
	PerQP bool
}

// Register adds --metrics and --metrics-qps to fs.
func (m *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&m.Addr, "metrics", "", "serve Prometheus text at http://`ADDR`/metrics and the queue pairs for 'iwarp-peer stat ADDR'")
	fs.BoolVar(&m.PerQP, "metrics-qps", false, "with --metrics: per-queue-pair series in /metrics too")
}

// Check refuses --metrics-qps without an endpoint to serve them.
func (m *Flags) Check() error {
	if m.PerQP && m.Addr == "" {
		return errors.New("--metrics-qps needs --metrics ADDR")
	}
	return nil
}

// Open serves the endpoint over conn's default device, the one the
// commands' queue pairs belong to; without --metrics it returns a nil
// *Server, whose methods do nothing.
func (m *Flags) Open() (*Server, error) {
	if m.Addr == "" {
		return nil, nil
	}
	srv, err := Serve(m.Addr, metrics.NewSource(conn.DefaultDevice()), m.PerQP)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	return srv, nil
}
