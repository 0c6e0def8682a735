package iwarpprom

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// Collector is a prometheus.Collector over a metrics.Source. Each scrape
// reads the source once.
type Collector struct {
	src   *metrics.Source
	perQP bool

	dev, qp                                 family
	connections, closed, open, setup, rejRx *prometheus.Desc
	qpSetup                                 *prometheus.Desc
	lnAccepted, lnRefused                   *prometheus.Desc
	sinkInfo, persists, persisted           *prometheus.Desc
	persistErrs, persistTime                *prometheus.Desc
}

// Option configures a Collector.
type Option func(*options)

type options struct {
	perQP  bool
	labels prometheus.Labels
}

// PerQueuePair adds each live queue pair's series, labelled by qpn and
// remote address.
func PerQueuePair() Option { return func(o *options) { o.perQP = true } }

// ConstLabels adds labels to every series: to tell devices apart, say,
// when several collectors share a registry.
func ConstLabels(l prometheus.Labels) Option { return func(o *options) { o.labels = l } }

// NewCollector returns a collector of src; register it with a
// prometheus.Registerer.
func NewCollector(src *metrics.Source, opts ...Option) *Collector {
	var o options
	for _, f := range opts {
		f(&o)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, o.labels)
	}
	qpLabels := []string{"qpn", "remote"}
	return &Collector{
		src:         src,
		perQP:       o.perQP,
		dev:         newFamily("iwarp_", nil, desc),
		qp:          newFamily("iwarp_qp_", qpLabels, desc),
		connections: desc("iwarp_connections_total", "Connections established."),
		closed:      desc("iwarp_connections_closed_total", "Connections ended."),
		open:        desc("iwarp_connections_open", "Connections established and not yet ended."),
		setup:       desc("iwarp_setup_seconds_total", "Time connection setups took, from TCP connect or accept to the connection running."),
		rejRx:       desc("iwarp_rejects_received_total", "Connection attempts the peer rejected (an MPA Reply with R set)."),
		qpSetup:     desc("iwarp_qp_setup_seconds", "Time the queue pair's connection setup took.", qpLabels...),
		lnAccepted:  desc("iwarp_listener_accepted_total", "TCP connections a listener accepted.", "listener"),
		lnRefused:   desc("iwarp_listener_refused_total", "Connections a listener turned away, by reason.", "listener", "reason"),
		sinkInfo:    desc("iwarp_pmem_sink_info", "A pmemsink target: its persistence mode, and whether its persists make bytes durable (1).", "sink", "mode", "durable"),
		persists:    desc("iwarp_pmem_persists_total", "Persist passes a pmemsink target ran (one fence, or one series of msyncs, per flush).", "sink"),
		persisted:   desc("iwarp_pmem_persisted_bytes_total", "Bytes of the ranges the persists were asked for, before rounding to lines or pages.", "sink"),
		persistErrs: desc("iwarp_pmem_persist_errors_total", "Persists that failed (the sink fails every later one too).", "sink"),
		persistTime: desc("iwarp_pmem_persist_seconds_total", "Time the persists took, in all (with iwarp_pmem_persists_total: the mean persist latency).", "sink"),
	}
}

// Describe sends the descriptions of every series the collector makes.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.dev.describe(ch)
	for _, d := range []*prometheus.Desc{c.connections, c.closed, c.open, c.setup, c.rejRx, c.lnAccepted, c.lnRefused,
		c.sinkInfo, c.persists, c.persisted, c.persistErrs, c.persistTime} {
		ch <- d
	}
	if c.perQP {
		c.qp.describe(ch)
		ch <- c.qpSetup
	}
}

// Collect reads the source and sends its series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r := c.src.Report(c.perQP)
	d := &r.Device
	c.dev.collect(ch, d)
	counter := func(desc *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, lv...)
	}
	counter(c.connections, float64(d.Connections))
	counter(c.closed, float64(d.Closed))
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(d.Connections-min(d.Closed, d.Connections)))
	counter(c.setup, d.SetupSeconds)
	counter(c.rejRx, float64(d.RejectsReceived))
	for _, l := range r.Listeners {
		counter(c.lnAccepted, float64(l.Accepted), l.Addr)
		for _, reason := range metrics.RefusalReasons {
			counter(c.lnRefused, float64(l.Refused[reason.Label]), l.Addr, reason.Label)
		}
	}
	for _, s := range r.Sinks {
		ch <- prometheus.MustNewConstMetric(c.sinkInfo, prometheus.GaugeValue, 1, s.Name, s.Mode, strconv.FormatBool(s.Durable))
		counter(c.persists, float64(s.Persists), s.Name)
		counter(c.persisted, float64(s.BytesPersisted), s.Name)
		counter(c.persistErrs, float64(s.PersistErrors), s.Name)
		counter(c.persistTime, s.PersistSeconds, s.Name)
	}
	for i := range r.QueuePairs {
		q := &r.QueuePairs[i]
		qpn := strconv.FormatUint(uint64(q.QPN), 10)
		c.qp.collect(ch, &q.Counters, qpn, q.Remote)
		ch <- prometheus.MustNewConstMetric(c.qpSetup, prometheus.GaugeValue, q.SetupSeconds, qpn, q.Remote)
	}
}

// family is the series a device and a queue pair both have, named with a
// prefix and labelled with labels first.
type family struct {
	fpdusTx, fpdusRx, bytesTx, bytesRx *prometheus.Desc // + opcode
	termTx, termRx                     *prometheus.Desc // + code, name
	crc, readsQueued, readsIssued      *prometheus.Desc
	readsHeld                          *prometheus.Desc
}

func newFamily(prefix string, labels []string, desc func(name, help string, labels ...string) *prometheus.Desc) family {
	with := func(extra ...string) []string { return append(slices.Clone(labels), extra...) }
	return family{
		fpdusTx:     desc(prefix+"fpdus_sent_total", "FPDUs sent, by RDMAP opcode.", with("opcode")...),
		fpdusRx:     desc(prefix+"fpdus_received_total", "FPDUs received, by RDMAP opcode.", with("opcode")...),
		bytesTx:     desc(prefix+"bytes_sent_total", "ULPDU bytes (DDP and RDMAP headers and payload) sent, by RDMAP opcode.", with("opcode")...),
		bytesRx:     desc(prefix+"bytes_received_total", "ULPDU bytes (DDP and RDMAP headers and payload) received, by RDMAP opcode.", with("opcode")...),
		termTx:      desc(prefix+"terminates_sent_total", "Terminates sent, by code (layer, error type, error code) and name.", with("code", "name")...),
		termRx:      desc(prefix+"terminates_received_total", "Terminates received, by code (layer, error type, error code) and name.", with("code", "name")...),
		crc:         desc(prefix+"crc_errors_total", "FPDUs whose MPA CRC did not check.", labels...),
		readsQueued: desc(prefix+"reads_queued_total", "The peers' RDMA Read Requests taken into the inbound read queue (bounded by the IRD).", labels...),
		readsIssued: desc(prefix+"reads_issued_total", "RDMA Read Requests sent (bounded by the ORD).", labels...),
		readsHeld:   desc(prefix+"reads_held_total", "Inbound RDMA Read Requests a region's hooks held back (a persist before the response).", labels...),
	}
}

func (f *family) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{f.fpdusTx, f.fpdusRx, f.bytesTx, f.bytesRx, f.termTx, f.termRx, f.crc, f.readsQueued, f.readsIssued, f.readsHeld} {
		ch <- d
	}
}

// collect sends c's series; lv are the values of the family's labels.
func (f *family) collect(ch chan<- prometheus.Metric, c *metrics.Counters, lv ...string) {
	counter := func(desc *prometheus.Desc, v uint64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), append(slices.Clone(lv), extra...)...)
	}
	for _, m := range []struct {
		desc *prometheus.Desc
		by   map[string]uint64
	}{{f.fpdusTx, c.FPDUsSent}, {f.fpdusRx, c.FPDUsReceived}, {f.bytesTx, c.BytesSent}, {f.bytesRx, c.BytesReceived}} {
		for _, op := range opcodes(m.by) {
			counter(m.desc, m.by[op], op)
		}
	}
	for _, t := range c.TerminatesSent {
		counter(f.termTx, t.Count, t.Code, t.Name)
	}
	for _, t := range c.TerminatesReceived {
		counter(f.termRx, t.Count, t.Code, t.Name)
	}
	counter(f.crc, c.CRCErrors)
	counter(f.readsQueued, c.ReadsQueued)
	counter(f.readsIssued, c.ReadsIssued)
	counter(f.readsHeld, c.ReadsHeld)
}

// definedOpcodes are the labels reported always.
var definedOpcodes = func() []string {
	ls := make([]string, metrics.DefinedOpcodes)
	for i := range ls {
		ls[i] = metrics.OpcodeLabel(rdmap.Opcode(i))
	}
	return ls
}()

// opcodes returns the labels to report from a count by opcode: the
// defined opcodes, then any other that occurred.
func opcodes(by map[string]uint64) []string {
	ls := definedOpcodes
	for op := metrics.DefinedOpcodes; op < 16; op++ {
		if l := metrics.OpcodeLabel(rdmap.Opcode(op)); by[l] > 0 {
			if len(ls) == metrics.DefinedOpcodes {
				ls = slices.Clone(ls)
			}
			ls = append(ls, l)
		}
	}
	return ls
}
