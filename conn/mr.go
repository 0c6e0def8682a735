package conn

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// RegOption adjusts one memory registration.
type RegOption func(*regConfig)

type regConfig struct {
	base     stag.Base
	opts     stag.RegisterOption
	hooks    RegionHooks
	watched  bool
	mayFault bool
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

// WithHooks lets h take part in what peers do with the region: it is told
// of every range placed into it, and may hold back the response to an RDMA
// Read of it (a persistent-memory target persists what the connection
// wrote first; package pmemsink does this).
func WithHooks(h RegionHooks) RegOption { return func(c *regConfig) { c.hooks = h } }

// Watched makes placements into the region safe to observe while they
// happen: the program may read its bytes with MR.ReadAt and MR.LoadUint64
// at any time, with no data race against a peer's RDMA Write, Read
// Response or Send. A placement then lands with one copy under the
// region's lock after its CRC checked, instead of straight from the
// socket: use it for memory a program polls (a flag the peer writes), not
// for bulk transfers.
func Watched() RegOption { return func(c *regConfig) { c.watched = true } }

// MayFault declares memory whose pages can fault on access (a mapping of a
// file that may be truncated, a device mapping). Every access of the
// library to it — placement, CRC, Read Response framing — runs so that a
// fault ends only the connection that made it, with a Terminate and a
// MemoryFaultError, instead of the process.
func MayFault() RegOption { return func(c *regConfig) { c.mayFault = true } }

// RegionHooks let the owner of a region's memory take part in remote
// accesses to it (WithHooks). Methods are called by the goroutine holding
// the connection's receive token, in stream order; they must not block
// and should not allocate.
type RegionHooks interface {
	// Placed reports that qp's peer placed n bytes at offset off of the
	// region, after their CRC checked.
	Placed(qp *QP, off, n int)
	// ReadRequested reports a peer's RDMA Read Request for n bytes at off,
	// after everything the connection placed before it was reported. The
	// response waits until release.Release is called, here or later from
	// any goroutine; responses of the connection stay in request order,
	// and the rest of its traffic goes on meanwhile.
	ReadRequested(qp *QP, off, n int, release ReadRelease)
}

// ReadRelease lets a held Read Response go (RegionHooks.ReadRequested). It
// is a small value: copying it does not allocate.
type ReadRelease struct{ inboundRelease }

// Release sends the response, or, with a non-nil err, ends the connection
// with a Terminate (RDMAP local catastrophic error) and err as the reason.
// Calls after the first, and calls after the connection ended, do nothing.
// When the connection's writer is free, the calling goroutine writes the
// response itself, without blocking (what the socket does not take is left
// to the queue pair's transmitter).
func (r ReadRelease) Release(err error) { r.release(reqRead, err, nil) }

// Register registers buf with the given rights and returns a memory region
// with a fresh STag. The region keeps buf alive; the program must not grow
// or reallocate it while registered.
func (pd *PD) Register(buf []byte, access Access, opts ...RegOption) (*MR, error) {
	cfg := regConfig{base: stag.BaseVA()}
	for _, o := range opts {
		o(&cfg)
	}
	ext := &regionExt{mem: buf, hooks: cfg.hooks, mayFault: cfg.mayFault}
	if cfg.watched {
		ext.watch = new(sync.RWMutex)
	}
	r, err := pd.pd.RegisterAttached(buf, access|stag.LocalRead, cfg.base, ext, cfg.opts)
	if err != nil {
		return nil, fmt.Errorf("iwarp: register: %w", err)
	}
	return &MR{pd: pd, r: r, ext: ext}, nil
}

// MR is a registered memory region.
type MR struct {
	pd  *PD
	r   *stag.Region
	ext *regionExt
}

// regionExt is what the engine needs to know of a region beyond its
// protection state; the stag region carries it (its attachment), fixed at
// registration.
type regionExt struct {
	mem      []byte
	hooks    RegionHooks
	watch    *sync.RWMutex // Watched: placements and ReadAt take it
	mayFault bool
}

// STag returns the region's STag (its lkey and rkey at once).
func (mr *MR) STag() STag { return mr.r.STag() }

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
// It never waits on the network: a peer's access under way at that moment
// (an RDMA Write being placed, a Read Response being sent) ends its
// connection with a Terminate, and Invalidate returns once the library no
// longer touches the memory. After it returns, no peer reads or writes a
// byte of the region until it is revalidated.
func (mr *MR) Invalidate() error {
	if err := mr.r.Invalidate(); err != nil {
		return err
	}
	revokeRemote(mr.pd, mr.r)
	return nil
}

// Revalidate makes an invalidated region usable again under a new STag.
func (mr *MR) Revalidate() (STag, error) { return mr.r.Revalidate() }

// ErrMRBusy is returned by Deregister while posted work uses the region.
var ErrMRBusy = stag.ErrBusy

// Deregister releases the region. It fails with ErrMRBusy, changing
// nothing, while posted work requests name it. Like Invalidate it never
// waits on the network: a peer's access under way ends its connection
// with a Terminate, and after a nil return no peer reads or writes a byte
// of the memory, which the program may then reuse.
func (mr *MR) Deregister() error {
	err := mr.r.Deregister()
	if err != nil {
		if errors.Is(err, ErrMRBusy) {
			return err
		}
		return fmt.Errorf("iwarp: deregister: %w", err)
	}
	revokeRemote(mr.pd, mr.r)
	return nil
}

// revokeRemote ends every remote access of the region still under way and
// waits until none holds it. The region's state has already changed, so no
// new access begins. The connections involved are cut short without
// waiting for their peers, so the wait is bounded by how fast their
// goroutines react, not by the network.
func revokeRemote(pd *PD, r *stag.Region) {
	if r.RemoteUses() == 0 {
		return
	}
	pd.eachEngine(func(e *engine) { e.revoke(r) })
	for backoff := time.Microsecond; r.RemoteUses() > 0; backoff = min(2*backoff, time.Millisecond) {
		time.Sleep(backoff)
	}
}

// revoke ends this connection if it is accessing region r: a placement in
// progress is cut (the receive token holder then sends the Terminate that
// names the segment), queued or sending Read Responses of r end the stream
// with a Terminate about the first such request.
func (e *engine) revoke(r *stag.Region) {
	e.revoking.Store(r)
	e.cutMu.Lock()
	if e.placing.Load() == r {
		e.c.SetReadDeadline(time.Now())
	}
	e.cutMu.Unlock()
	qp := e.qp
	qp.mu.Lock()
	ent, reading := e.irq.uses(r)
	if !reading {
		for _, x := range e.release {
			if x == r {
				reading = true
			}
		}
	}
	var req [rdmap.ReadRequestHeaderLen]byte
	if ent != nil {
		req = ent.req
	}
	qp.mu.Unlock()
	if reading {
		rr := req[len(req)-rdmap.ReadRequestBodyLen:]
		te := rdmap.LocalTerminateError(rdmap.NewError(rdmap.ReadReqSourceInvalidSTag, req[:], len(req), rr))
		t := te.Terminate
		e.failWithin(te, &t, 0)
	}
}

// MemoryFaultError reports an access of the library to memory registered
// with MayFault that faulted: the connection that made it ended, the
// process goes on.
type MemoryFaultError struct {
	Addr uintptr // the faulting address
}

func (e *MemoryFaultError) Error() string {
	return fmt.Sprintf("iwarp: memory fault at %#x in a region registered with MayFault", e.Addr)
}

// ReadAt copies region bytes from off into p (io.ReaderAt). On a Watched
// region it never races with a peer's placement; on any other region the
// program must know that no peer writes those bytes meanwhile (the memory
// model in the package documentation).
func (mr *MR) ReadAt(p []byte, off int64) (int, error) {
	b := mr.r.Bytes()
	if off < 0 || off > int64(len(b)) {
		return 0, fmt.Errorf("iwarp: ReadAt offset %d outside a %d-byte region", off, len(b))
	}
	if w := mr.ext.watch; w != nil {
		w.RLock()
		defer w.RUnlock()
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, errShortRegion
	}
	return n, nil
}

var errShortRegion = errors.New("iwarp: ReadAt past the end of the region")

// LoadUint64 atomically loads the 8-aligned 64-bit word at off (the byte
// order of the machine). It is race-free against a peer's 8-byte RDMA
// Write of that word, which is placed with one store, and on a Watched
// region against any placement. It panics if off is not 8-aligned or not
// inside the region, like an index out of range.
func (mr *MR) LoadUint64(off int) uint64 {
	b := mr.r.Bytes()
	w := b[off : off+8 : off+8]
	if !aligned8(w) {
		panic(fmt.Sprintf("iwarp: LoadUint64 at offset %d: not 8-aligned", off))
	}
	if l := mr.ext.watch; l != nil {
		l.RLock()
		defer l.RUnlock()
	}
	return load8(w)
}

// copyWatched copies a staged payload into a Watched region.
func copyWatched(x *regionExt, dst, src []byte) {
	x.watch.Lock()
	copy(dst, src)
	x.watch.Unlock()
}

// stagePool holds the buffers payloads for Watched regions pass through:
// at most one FPDU's payload each, reused, so placement does not allocate
// in steady state.
var stagePool = sync.Pool{New: func() any { b := make([]byte, 1<<16); return &b }}

func getStage() *[]byte { return stagePool.Get().(*[]byte) }

func putStage(b *[]byte) { stagePool.Put(b) }
