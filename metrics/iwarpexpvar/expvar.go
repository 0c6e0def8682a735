// Package iwarpexpvar publishes iwarp-go's counters with the standard
// library's expvar: the zero-dependency alternative to metrics/iwarpprom.
// The value is a metrics.Report as JSON, read afresh at every request of
// /debug/vars (or every expvar.Do).
package iwarpexpvar

import (
	"expvar"

	"github.com/iwarp-go/iwarp-go/metrics"
)

// Option configures what is published.
type Option func(*options)

type options struct{ queuePairs bool }

// WithQueuePairs adds each live queue pair's counters to the report.
func WithQueuePairs() Option { return func(o *options) { o.queuePairs = true } }

// Func returns src's report as an expvar.Var, to publish under a name of
// the caller's choice or to serve by other means.
func Func(src *metrics.Source, opts ...Option) expvar.Func {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return func() any { return src.Report(o.queuePairs) }
}

// Publish publishes src's report under name. Like expvar.Publish, it
// panics if the name is already taken: publish once per process, from an
// init or main.
func Publish(name string, src *metrics.Source, opts ...Option) {
	expvar.Publish(name, Func(src, opts...))
}
