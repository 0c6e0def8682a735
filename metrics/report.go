package metrics

import (
	"cmp"
	"slices"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pmemsink"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Report is what a Source reports at one moment, in the form its JSON
// takes: opcodes and refusal reasons by label, Terminates by code.
type Report struct {
	Device    Counters   `json:"device"`
	Listeners []Listener `json:"listeners,omitempty"`
	// QueuePairs, in QPN order, only where asked for.
	QueuePairs []QueuePair `json:"queue_pairs,omitempty"`
	// Sinks are the pmemsink targets added to the source.
	Sinks []Sink `json:"sinks,omitempty"`
}

// Sink is a pmemsink target's persists (pmemsink.Stats).
type Sink struct {
	Name string `json:"name"`
	// Mode is the persistence mode in use (pmemsink.Mode's String) and
	// Durable whether its persists make bytes durable.
	Mode           string  `json:"mode"`
	Durable        bool    `json:"durable"`
	Persists       uint64  `json:"persists"`
	BytesPersisted uint64  `json:"bytes_persisted"`
	PersistErrors  uint64  `json:"persist_errors"`
	PersistSeconds float64 `json:"persist_seconds"`
}

// SinkOf is a sink's report entry.
func SinkOf(name string, info pmemsink.Info, st pmemsink.Stats) Sink {
	return Sink{Name: name, Mode: info.Mode.String(), Durable: info.Durable, Persists: st.Persists,
		BytesPersisted: st.BytesPersisted, PersistErrors: st.Errors, PersistSeconds: st.PersistTime.Seconds()}
}

// Counters are conn.Stats by label. The maps by opcode hold the opcodes
// that occurred; an absent opcode counts zero.
type Counters struct {
	FPDUsSent     map[string]uint64 `json:"fpdus_sent,omitempty"`
	FPDUsReceived map[string]uint64 `json:"fpdus_received,omitempty"`
	// BytesSent and BytesReceived count ULPDU bytes: DDP and RDMAP
	// headers and payload, without MPA framing.
	BytesSent     map[string]uint64 `json:"bytes_sent,omitempty"`
	BytesReceived map[string]uint64 `json:"bytes_received,omitempty"`
	CRCErrors     uint64            `json:"crc_errors"`
	// Terminates sent and received, in code order.
	TerminatesSent     []Terminate `json:"terminates_sent,omitempty"`
	TerminatesReceived []Terminate `json:"terminates_received,omitempty"`
	ReadsQueued        uint64      `json:"reads_queued"`
	ReadsIssued        uint64      `json:"reads_issued"`
	ReadsHeld          uint64      `json:"reads_held"`
	Connections        uint64      `json:"connections"`
	Closed             uint64      `json:"closed"`
	// SetupSeconds is the time connection setups took, in all.
	SetupSeconds    float64 `json:"setup_seconds"`
	RejectsReceived uint64  `json:"rejects_received"`
}

// Terminate is a count of Terminates of one code.
type Terminate struct {
	Code  string `json:"code"` // CodeLabel
	Name  string `json:"name"` // CodeName
	Count uint64 `json:"count"`
}

// Listener is what a listener accepted and turned away.
type Listener struct {
	Addr     string `json:"addr"`
	Accepted uint64 `json:"accepted"`
	// Refused counts by RefusalReasons label, every reason present.
	Refused map[string]uint64 `json:"refused"`
}

// QueuePair is a live queue pair's counters.
type QueuePair struct {
	QPN    uint32 `json:"qpn"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// IRD and ORD are the Read depths in use (conn.QP.ReadLimits).
	IRD int `json:"ird"`
	ORD int `json:"ord"`
	Counters
}

// FPDUs returns the FPDUs sent and received, all opcodes together.
func (c *Counters) FPDUs() (sent, received uint64) { return sum(c.FPDUsSent), sum(c.FPDUsReceived) }

// Bytes returns the ULPDU bytes sent and received, all opcodes together.
func (c *Counters) Bytes() (sent, received uint64) { return sum(c.BytesSent), sum(c.BytesReceived) }

// Terminates returns the Terminates sent and received, all codes together.
func (c *Counters) Terminates() (sent, received uint64) {
	for _, t := range c.TerminatesSent {
		sent += t.Count
	}
	for _, t := range c.TerminatesReceived {
		received += t.Count
	}
	return sent, received
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// CountersOf returns s by label.
func CountersOf(s *conn.Stats) Counters {
	return Counters{
		FPDUsSent:          byOpcode(&s.FPDUsSent),
		FPDUsReceived:      byOpcode(&s.FPDUsReceived),
		BytesSent:          byOpcode(&s.BytesSent),
		BytesReceived:      byOpcode(&s.BytesReceived),
		CRCErrors:          s.CRCErrors,
		TerminatesSent:     byCode(s.TerminatesSent),
		TerminatesReceived: byCode(s.TerminatesReceived),
		ReadsQueued:        s.ReadsQueued,
		ReadsIssued:        s.ReadsIssued,
		ReadsHeld:          s.ReadsHeld,
		Connections:        s.Connections,
		Closed:             s.Closed,
		SetupSeconds:       float64(s.SetupNanos) / 1e9,
		RejectsReceived:    s.RejectsReceived,
	}
}

func byOpcode(a *[16]uint64) map[string]uint64 {
	var m map[string]uint64
	for op, n := range a {
		if n == 0 {
			continue
		}
		if m == nil {
			m = make(map[string]uint64)
		}
		m[OpcodeLabel(rdmap.Opcode(op))] = n
	}
	return m
}

func byCode(m map[termcode.Code]uint64) []Terminate {
	var ts []Terminate
	for c, n := range m {
		if n > 0 {
			ts = append(ts, Terminate{Code: CodeLabel(c), Name: CodeName(c), Count: n})
		}
	}
	slices.SortFunc(ts, func(a, b Terminate) int { return cmp.Compare(a.Code, b.Code) })
	return ts
}

// ListenerOf returns what the listener at addr counted, by label.
func ListenerOf(addr string, s *conn.ListenerStats) Listener {
	l := Listener{Addr: addr, Accepted: s.Accepted, Refused: make(map[string]uint64, len(RefusalReasons))}
	for _, r := range RefusalReasons {
		l.Refused[r.Label] = r.Count(s)
	}
	return l
}
