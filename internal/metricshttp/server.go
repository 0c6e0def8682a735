// Package metricshttp is the HTTP side of iwarp-peer's counters: the
// endpoint a server command's --metrics opens (Flags; Prometheus text at
// /metrics, the JSON report with every live queue pair at ReportPath) and
// what "iwarp-peer stat" does with it (Fetch, Table, Watch).
package metricshttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/metrics/iwarpprom"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// ReportPath is where the endpoint serves the JSON report (a
// metrics.Report with its queue pairs).
const ReportPath = "/debug/iwarp"

// Server is a running endpoint. Its methods do nothing on a nil *Server,
// so that a command without --metrics calls them all the same.
type Server struct {
	src  *metrics.Source
	ln   net.Listener
	http *http.Server
	done chan struct{}
}

// Serve listens on addr and serves src: /metrics (with perQP, the
// iwarp_qp_ series too; the Go runtime's and the process's series
// besides) and ReportPath.
func Serve(addr string, src *metrics.Source, perQP bool) (*Server, error) {
	reg := prometheus.NewRegistry()
	var opts []iwarpprom.Option
	if perQP {
		opts = append(opts, iwarpprom.PerQueuePair())
	}
	reg.MustRegister(iwarpprom.NewCollector(src, opts...),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+ReportPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(src.Report(true))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{src: src, ln: ln, done: make(chan struct{}),
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(s.done)
		s.http.Serve(ln)
	}()
	return s, nil
}

// Addr returns the address the endpoint listens on.
func (s *Server) Addr() net.Addr {
	if s == nil {
		return nil
	}
	return s.ln.Addr()
}

// AddListener reports l too (what it accepted and turned away).
func (s *Server) AddListener(l *conn.Listener) {
	if s != nil {
		s.src.AddListener(l)
	}
}

// AddSink reports a pmemsink target's persists too, under name.
func (s *Server) AddSink(name string, sk *pmemsink.Sink) {
	if s != nil {
		s.src.AddSink(name, sk)
	}
}

// Close stops the endpoint and waits for it.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.http.Close()
	<-s.done
}

// Fetch reads the JSON report of the endpoint at addr: "host:port", or a
// URL whose scheme and host are used ("http://host:port/metrics").
func Fetch(ctx context.Context, client *http.Client, addr string) (*metrics.Report, error) {
	u := &url.URL{Scheme: "http", Host: addr}
	if strings.Contains(addr, "://") {
		p, err := url.Parse(addr)
		if err != nil {
			return nil, err
		}
		u.Scheme, u.Host = p.Scheme, p.Host
	}
	u.Path = ReportPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s (is it an iwarp-peer server with --metrics?)", u, resp.Status)
	}
	var r metrics.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return &r, nil
}
