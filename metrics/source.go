package metrics

import (
	"cmp"
	"net"
	"slices"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

// Source is what an exporter reports: a device and the listeners added to
// it. Its methods may be called from any goroutine.
type Source struct {
	dev *conn.Device

	mu        sync.Mutex
	listeners []*conn.Listener
	sinks     []namedSink
}

type namedSink struct {
	name string
	s    *pmemsink.Sink
}

// NewSource reports dev (nil: conn.DefaultDevice(), the device conn.NewPD
// uses) and the listeners given.
func NewSource(dev *conn.Device, listeners ...*conn.Listener) *Source {
	if dev == nil {
		dev = conn.DefaultDevice()
	}
	s := &Source{dev: dev}
	for _, l := range listeners {
		s.AddListener(l)
	}
	return s
}

// Device returns the device the source reports.
func (s *Source) Device() *conn.Device { return s.dev }

// AddListener reports l too, from now on; adding it again does nothing.
// Listeners are not tied to a device in conn: the source reports whichever
// it is given.
func (s *Source) AddListener(l *conn.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.listeners, l) {
		s.listeners = append(s.listeners, l)
	}
}

// RemoveListener stops reporting l (its series end with it).
func (s *Source) RemoveListener(l *conn.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = slices.DeleteFunc(s.listeners, func(x *conn.Listener) bool { return x == l })
}

// AddSink reports the persists of a pmemsink target too, under name (its
// file's path, say); adding a sink again does nothing.
func (s *Source) AddSink(name string, sk *pmemsink.Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.sinks, func(n namedSink) bool { return n.s == sk }) {
		s.sinks = append(s.sinks, namedSink{name, sk})
	}
}

// Report reads the device's totals and the listeners' counters; with
// queuePairs also each live queue pair's counters.
func (s *Source) Report(queuePairs bool) Report {
	d := s.dev.Stats()
	r := Report{Device: CountersOf(&d)}
	s.mu.Lock()
	ls := slices.Clone(s.listeners)
	sinks := slices.Clone(s.sinks)
	s.mu.Unlock()
	for _, l := range ls {
		st := l.Stats()
		r.Listeners = append(r.Listeners, ListenerOf(l.Addr().String(), &st))
	}
	for _, n := range sinks {
		r.Sinks = append(r.Sinks, SinkOf(n.name, n.s.Info(), n.s.Stats()))
	}
	if queuePairs {
		r.QueuePairs = s.QueuePairs()
	}
	return r
}

// QueuePairs returns the counters of the device's live queue pairs, in
// QPN order.
func (s *Source) QueuePairs() []QueuePair {
	qps := s.dev.QueuePairs()
	out := make([]QueuePair, 0, len(qps))
	for _, qp := range qps {
		st := qp.Stats()
		ird, ord := qp.ReadLimits()
		out = append(out, QueuePair{
			QPN: qp.QPN(), Local: addr(qp.LocalAddr()), Remote: addr(qp.RemoteAddr()),
			IRD: ird, ORD: ord, Counters: CountersOf(&st),
		})
	}
	slices.SortFunc(out, func(a, b QueuePair) int { return cmp.Compare(a.QPN, b.QPN) })
	return out
}

func addr(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
