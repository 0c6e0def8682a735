// Package metrics turns the counters of package conn into a report that
// exporters publish: a device's totals (closed queue pairs included), what
// listeners turned away, and, on request, each live queue pair's own
// counters. It has no dependencies beyond iwarp-go itself.
//
// A Source names what to report: a device and the listeners added to it.
// Report reads it, with label names shared by every exporter: opcodes as
// OpcodeLabel spells them, Terminate codes as CodeLabel does, listener
// refusals by RefusalReasons. Package metrics/iwarpprom exports a Source to
// Prometheus and package metrics/iwarpexpvar publishes it with expvar;
// Report's JSON is what expvar shows and what "iwarp-peer stat" reads.
//
// Reading a Source takes the locks conn's snapshots take (a device's, for
// the list of its queue pairs) and allocates; the data path is never
// involved: counting is conn's job, and it neither locks nor allocates.
package metrics
