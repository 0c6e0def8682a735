package conn

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iwarp-go/iwarp-go/stag"
)

// Access is a set of rights on a memory region. Local read is implied by
// every registration, as in verbs.
type Access = stag.Access

// The rights a region can grant. RemoteWrite requires LocalWrite.
const (
	LocalWrite  = stag.LocalWrite
	RemoteRead  = stag.RemoteRead
	RemoteWrite = stag.RemoteWrite
)

// Device is one STag index space, like one RDMA device: STags are unique
// within it, and the protection domain of a region is what tells "STag not
// associated with this connection" apart from "invalid STag". Most programs
// use the default device through NewPD.
type Device struct {
	table *stag.Table
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

// PD is a protection domain: queue pairs may only use, and let their peers
// use, memory regions of their own PD.
type PD struct {
	dev *Device
	pd  *stag.PD
}

// RegOption adjusts one memory registration.
type RegOption func(*regConfig)

type regConfig struct {
	base stag.Base
	opts stag.RegisterOption
}

// ZeroBased makes tagged offset 0 address the region's first byte. By
// default a region is addressed by the virtual address of its bytes, as
// verbs programs such as rping expect.
func ZeroBased() RegOption { return func(c *regConfig) { c.base = stag.BaseZero() } }

// BaseTO makes to the tagged offset of the region's first byte.
func BaseTO(to uint64) RegOption { return func(c *regConfig) { c.base = stag.BaseAt(to) } }

// NoRemoteInvalidate keeps a peer's Send with Invalidate from invalidating
// the region.
func NoRemoteInvalidate() RegOption {
	return func(c *regConfig) { c.opts |= stag.NoRemoteInvalidate }
}

// Register registers buf with the given rights and returns a memory region
// with a fresh STag. The region keeps buf alive; the program must not grow
// or reallocate it while registered.
func (pd *PD) Register(buf []byte, access Access, opts ...RegOption) (*MR, error) {
	cfg := regConfig{base: stag.BaseVA()}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := pd.pd.Register(buf, access|stag.LocalRead, cfg.base, cfg.opts)
	if err != nil {
		return nil, fmt.Errorf("iwarp: register: %w", err)
	}
	return &MR{pd: pd, r: r}, nil
}

// MR is a registered memory region.
type MR struct {
	pd *PD
	r  *stag.Region
}

// STag returns the region's STag (its lkey and rkey at once).
func (mr *MR) STag() stag.STag { return mr.r.STag() }

// Bytes returns the registered buffer.
func (mr *MR) Bytes() []byte { return mr.r.Bytes() }

// Len returns the length of the region.
func (mr *MR) Len() int { return mr.r.Len() }

// Access returns the rights the region grants.
func (mr *MR) Access() Access { return mr.r.Access() }

// PD returns the protection domain of the region.
func (mr *MR) PD() *PD { return mr.pd }

// Remote returns the address a peer uses for byte off of the region.
func (mr *MR) Remote(off int) RemoteAddr {
	return RemoteAddr{STag: mr.r.STag(), TO: mr.r.TO(uint64(off))}
}

// SGE returns an SGE for length bytes at off.
func (mr *MR) SGE(off, length int) SGE { return SGE{MR: mr, Offset: off, Length: length} }

// Invalidate invalidates the region's STag: peers can no longer use it.
func (mr *MR) Invalidate() error { return mr.r.Invalidate() }

// Revalidate makes an invalidated region usable again under a new STag.
func (mr *MR) Revalidate() (stag.STag, error) { return mr.r.Revalidate() }

// ErrMRBusy is returned by Deregister while posted work uses the region.
var ErrMRBusy = stag.ErrBusy

// Deregister releases the region. It fails with ErrMRBusy while posted work
// requests name it.
func (mr *MR) Deregister() error {
	err := mr.r.Deregister()
	if err != nil && !errors.Is(err, ErrMRBusy) {
		return fmt.Errorf("iwarp: deregister: %w", err)
	}
	return err // nil, or ErrMRBusy itself
}
