package conn

import (
	"sync"

	"github.com/iwarp-go/iwarp-go/stag"
)

// Access is a set of rights on a memory region. Local read is implied by
// every registration, as in verbs.
type Access = stag.Access

// The rights a region can grant. RemoteWrite and RemoteAtomic require
// LocalWrite.
const (
	LocalWrite  = stag.LocalWrite
	RemoteRead  = stag.RemoteRead
	RemoteWrite = stag.RemoteWrite
	// RemoteAtomic lets peers name the region's 8-byte aligned words as
	// the targets of RFC 7306 atomics (OpFetchAdd, OpCmpSwap).
	RemoteAtomic = stag.RemoteAtomic
)

// Device is one STag index space, like one RDMA device: STags are unique
// within it, and the protection domain of a region is what tells "STag not
// associated with this connection" apart from "invalid STag". Most programs
// use the default device through NewPD.
type Device struct {
	table *stag.Table

	mu     sync.Mutex
	live   map[*QP]struct{} // connected queue pairs, for Stats
	closed counters         // totals of the closed ones
}

// NewDevice creates a device with its own STag index space.
func NewDevice() (*Device, error) {
	t, err := stag.NewTable()
	if err != nil {
		return nil, err
	}
	return &Device{table: t}, nil
}

var defaultDevice = sync.OnceValue(func() *Device {
	d, err := NewDevice()
	if err != nil {
		panic("iwarp: creating the default device: " + err.Error())
	}
	return d
})

// NewPD creates a protection domain on the default device.
func NewPD() *PD { return defaultDevice().NewPD() }

// NewPD creates a protection domain on d.
func (d *Device) NewPD() *PD { return &PD{dev: d, pd: d.table.NewPD()} }

// STag is a Steering Tag: what a peer names a registered region by.
type STag = stag.STag

// track and untrack keep the set of connections that may touch the PD's
// regions, which an invalidation must reach.
func (pd *PD) track(e *engine) {
	pd.mu.Lock()
	if pd.engines == nil {
		pd.engines = make(map[*engine]struct{})
	}
	if _, ok := pd.engines[e]; !ok {
		pd.engines[e] = struct{}{}
		pd.pd.AddStream(1)
	}
	pd.mu.Unlock()
}

func (pd *PD) untrack(e *engine) {
	pd.mu.Lock()
	if _, ok := pd.engines[e]; ok {
		delete(pd.engines, e)
		pd.pd.AddStream(-1)
	}
	pd.mu.Unlock()
}

// eachEngine calls f for every connection of the PD, outside pd.mu.
func (pd *PD) eachEngine(f func(*engine)) {
	pd.mu.Lock()
	es := make([]*engine, 0, len(pd.engines))
	for e := range pd.engines {
		es = append(es, e)
	}
	pd.mu.Unlock()
	for _, e := range es {
		f(e)
	}
}

// PD is a protection domain: queue pairs may only use, and let their peers
// use, memory regions of their own PD.
//
// A PD is the unit of trust between peers (RFC 5042): every queue pair of a
// PD may address every region of it that grants remote rights, and an STag,
// however unpredictable, is only a capability the peer was given. Serving
// peers that do not trust each other, give each its own PD (NewPD per
// connection) so that one cannot reach another's memory even with a guessed
// or leaked STag.
type PD struct {
	dev *Device
	pd  *stag.PD

	mu      sync.Mutex
	engines map[*engine]struct{} // connections running on the PD
}
