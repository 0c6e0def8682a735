package conn

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Stats is a snapshot of a queue pair's or a device's counters: plain
// values, safe to keep and compare. Counting takes no lock and allocates
// nothing; a snapshot costs a few hundred atomic loads.
type Stats struct {
	// FPDUs and their ULPDU bytes (DDP header and payload), by the RDMAP
	// opcode they carry (index rdmap.Opcode, 0 to 15).
	FPDUsSent, FPDUsReceived [16]uint64
	BytesSent, BytesReceived [16]uint64
	// CRCErrors counts FPDUs whose MPA CRC did not check.
	CRCErrors uint64
	// Terminates sent and received, by code.
	TerminatesSent, TerminatesReceived map[termcode.Code]uint64
	// ReadsQueued counts the peers' RDMA Read Requests taken into the
	// inbound read queue (bounded by the IRD); ReadsIssued this side's
	// Read Requests (bounded by the ORD). ReadsHeld counts inbound ones a
	// region's hooks held back (a persist before the response).
	ReadsQueued, ReadsIssued, ReadsHeld uint64
	// Connections established and closed; SetupNanos the time their setup
	// took in all (TCP connect or accept to the connection running).
	Connections, Closed uint64
	SetupNanos          uint64
	// RejectsReceived counts connection attempts the peer rejected (an MPA
	// Reply with R set); the rejects a listener sends are in ListenerStats.
	RejectsReceived uint64
}

// FPDUs returns the FPDUs sent and received, all opcodes together.
func (s *Stats) FPDUs() (sent, received uint64) {
	for i := range s.FPDUsSent {
		sent += s.FPDUsSent[i]
		received += s.FPDUsReceived[i]
	}
	return sent, received
}

// counters is what Stats snapshots: atomic, fixed size, owned by the
// goroutines that count (the receive and transmit token holders for the
// data path).
type counters struct {
	fpdusTx, fpdusRx [16]atomic.Uint64
	bytesTx, bytesRx [16]atomic.Uint64
	crcErrors        atomic.Uint64
	termTx, termRx   codeCounts
	readsQueued      atomic.Uint64
	readsIssued      atomic.Uint64
	readsHeld        atomic.Uint64
	connections      atomic.Uint64
	closed           atomic.Uint64
	setupNanos       atomic.Uint64
	rejectsRx        atomic.Uint64
}

// codeCounts counts Terminate codes in fixed slots: one per condition's
// code (what this side can send), the rest in "other" by layer.
type codeCounts struct {
	known [maxKnownCodes]atomic.Uint64
	other sync.Map // termcode.Code → *atomic.Uint64: rare codes, received only
}

// maxKnownCodes bounds the codes counted in fixed slots.
const maxKnownCodes = 64

// knownCodes are the Terminate codes of rdmap's conditions.
var knownCodes = func() []termcode.Code {
	seen := map[termcode.Code]bool{}
	var cs []termcode.Code
	for _, c := range rdmap.Conditions() {
		if code := c.Code(); !seen[code] && len(cs) < maxKnownCodes {
			seen[code] = true
			cs = append(cs, code)
		}
	}
	return cs
}()

func (cc *codeCounts) add(c termcode.Code) {
	for i, k := range knownCodes {
		if k == c {
			cc.known[i].Add(1)
			return
		}
	}
	v, _ := cc.other.LoadOrStore(c, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
}

func (cc *codeCounts) snapshot(into map[termcode.Code]uint64) {
	for i, k := range knownCodes {
		if n := cc.known[i].Load(); n > 0 {
			into[k] += n
		}
	}
	cc.other.Range(func(k, v any) bool {
		into[k.(termcode.Code)] += v.(*atomic.Uint64).Load()
		return true
	})
}

func (c *counters) snapshot(s *Stats) {
	for i := range c.fpdusTx {
		s.FPDUsSent[i] += c.fpdusTx[i].Load()
		s.FPDUsReceived[i] += c.fpdusRx[i].Load()
		s.BytesSent[i] += c.bytesTx[i].Load()
		s.BytesReceived[i] += c.bytesRx[i].Load()
	}
	s.CRCErrors += c.crcErrors.Load()
	c.termTx.snapshot(s.TerminatesSent)
	c.termRx.snapshot(s.TerminatesReceived)
	s.ReadsQueued += c.readsQueued.Load()
	s.ReadsIssued += c.readsIssued.Load()
	s.ReadsHeld += c.readsHeld.Load()
	s.Connections += c.connections.Load()
	s.Closed += c.closed.Load()
	s.SetupNanos += c.setupNanos.Load()
	s.RejectsReceived += c.rejectsRx.Load()
}

// addTo folds c into the device totals of closed queue pairs.
func (c *counters) addTo(d *counters) {
	for i := range c.fpdusTx {
		d.fpdusTx[i].Add(c.fpdusTx[i].Load())
		d.fpdusRx[i].Add(c.fpdusRx[i].Load())
		d.bytesTx[i].Add(c.bytesTx[i].Load())
		d.bytesRx[i].Add(c.bytesRx[i].Load())
	}
	d.crcErrors.Add(c.crcErrors.Load())
	for i := range c.termTx.known {
		d.termTx.known[i].Add(c.termTx.known[i].Load())
		d.termRx.known[i].Add(c.termRx.known[i].Load())
	}
	c.termRx.other.Range(func(k, v any) bool {
		n, _ := d.termRx.other.LoadOrStore(k, new(atomic.Uint64))
		n.(*atomic.Uint64).Add(v.(*atomic.Uint64).Load())
		return true
	})
	d.readsQueued.Add(c.readsQueued.Load())
	d.readsIssued.Add(c.readsIssued.Load())
	d.readsHeld.Add(c.readsHeld.Load())
	d.connections.Add(c.connections.Load())
	d.closed.Add(c.closed.Load())
	d.setupNanos.Add(c.setupNanos.Load())
	d.rejectsRx.Add(c.rejectsRx.Load())
}

func newStats() Stats {
	return Stats{
		TerminatesSent:     map[termcode.Code]uint64{},
		TerminatesReceived: map[termcode.Code]uint64{},
	}
}

// Stats returns the queue pair's counters: its connection's, once it has
// one (zero before).
func (qp *QP) Stats() Stats {
	s := newStats()
	qp.stats.snapshot(&s)
	return s
}

// Stats returns the device's counters: every queue pair of it that
// connected, closed ones included.
func (d *Device) Stats() Stats {
	s := newStats()
	// Under the lock, so that a queue pair closing meanwhile is counted
	// once, live or closed.
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed.snapshot(&s)
	for qp := range d.live {
		qp.stats.snapshot(&s)
	}
	return s
}

// liveQP and closedQP keep the device's totals: a queue pair counts while
// it lives, and is folded into the closed totals when it is closed.
func (d *Device) liveQP(qp *QP) {
	d.mu.Lock()
	if d.live == nil {
		d.live = make(map[*QP]struct{})
	}
	d.live[qp] = struct{}{}
	d.mu.Unlock()
}

func (d *Device) closedQP(qp *QP) {
	d.mu.Lock()
	if _, ok := d.live[qp]; ok {
		delete(d.live, qp)
		qp.stats.addTo(&d.closed)
	}
	d.mu.Unlock()
}

// failedQP folds the counters of a queue pair whose setup failed (the
// rejects it received) into the device's totals: it never lived, so
// closedQP does not see it.
func (d *Device) failedQP(qp *QP) {
	d.mu.Lock()
	if _, ok := d.live[qp]; !ok {
		qp.stats.addTo(&d.closed)
	}
	d.mu.Unlock()
}

// Device returns the device the protection domain belongs to.
func (pd *PD) Device() *Device { return pd.dev }

// DefaultDevice returns the device NewPD uses.
func DefaultDevice() *Device { return defaultDevice() }

// sinceNanos returns the nanoseconds since t, for the setup time.
func sinceNanos(t time.Time) uint64 { return uint64(time.Since(t)) }

func (c *counters) countTx(op rdmap.Opcode, n int) {
	c.fpdusTx[op&0x0f].Add(1)
	c.bytesTx[op&0x0f].Add(uint64(n))
}

// QueuePairs returns the device's connected queue pairs that are not yet
// closed, for per-queue-pair reports (metrics exporters keep them on
// request only: thousands of queue pairs make thousands of series).
func (d *Device) QueuePairs() []*QP {
	d.mu.Lock()
	defer d.mu.Unlock()
	qps := make([]*QP, 0, len(d.live))
	for qp := range d.live {
		qps = append(qps, qp)
	}
	return qps
}
