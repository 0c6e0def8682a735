package pmemsink

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// A Registration is a sink, or a window of it, registered as a memory
// region for the connections of one protection domain. Give every
// connection its own protection domain (RFC 5042: an STag is then valid on
// the connection it was given to only); the regions of one protection
// domain share one Tracker per sink, so that an RDMA Read on the connection
// persists everything the connection wrote into any of them.
//
// The registration takes part in what the peer does with the region
// (conn.WithHooks): every placement is recorded as dirty; an RDMA Read is
// answered only once the connection's dirty ranges are persistent (a Read
// on a clean connection is answered at once); a Flush Request is answered
// once its range is persistent, saying "persistent" only if the sink is
// Durable; a GPSPM flush request (Registration.GPSPM) is answered the same
// way. The persists run on a worker goroutine of the protection domain,
// never on the connection's receiver or transmitter, at most
// WithPersistConcurrency at once per sink. A persist that fails is never
// acknowledged: the Read's connection ends with a Terminate, the Flush
// Response says the persist failed, a GPSPM request gets no answer.
//
// Every library access to the region runs under fault containment
// (conn.MayFault): a fault ends only the connection that made it.
type Registration struct {
	s      *Sink
	g      *group
	gt     *groupTracker
	mr     *conn.MR
	win    Range
	access conn.Access
	cfg    regOptions

	closeOnce sync.Once
	closeErr  error
}

// RegisterOption configures Sink.Register.
type RegisterOption func(*regOptions)

type regOptions struct {
	conn   []conn.RegOption
	onStop func()
	// Test instrumentation (crash simulation over the network path).
	obs    observer
	obsIdx int
}

// WithRegOptions passes options to conn's registration (conn.ZeroBased,
// conn.BaseTO, conn.NoRemoteInvalidate). WithHooks and MayFault are the
// registration's own.
func WithRegOptions(opts ...conn.RegOption) RegisterOption {
	return func(o *regOptions) { o.conn = append(o.conn, opts...) }
}

// OnStop sets what Close of the sink calls to end the connection using the
// registration (it must not block: start the connection's teardown and
// return). The registration is closed right after it either way, which
// ends the peer's accesses to the region with a Terminate.
func OnStop(f func()) RegisterOption { return func(o *regOptions) { o.onStop = f } }

// Register registers n bytes of the sink from off (n = 0: to the end) in
// pd with the given rights, for one connection (see Registration). The
// region's rights are access plus LocalWrite when RemoteWrite or
// RemoteAtomic is asked for, as conn requires. An RFC 7306 atomic into the
// region is reported like a Write (its 8 bytes are dirty), so a later
// flush persists it.
func (s *Sink) Register(pd *conn.PD, off, n uint64, access conn.Access, opts ...RegisterOption) (*Registration, error) {
	size := uint64(s.info.Size)
	if n == 0 && off < size {
		n = size - off
	}
	if n == 0 {
		return nil, fmt.Errorf("pmemsink: register %s: empty window at %d of a %d-byte region", s.info.Path, off, size)
	}
	if err := s.checkRange(off, n); err != nil {
		return nil, fmt.Errorf("pmemsink: register %s: %w", s.info.Path, err)
	}
	if access&(conn.RemoteWrite|conn.RemoteAtomic) != 0 {
		access |= conn.LocalWrite
	}
	var cfg regOptions
	for _, o := range opts {
		o(&cfg)
	}
	r := &Registration{s: s, win: Range{Off: off, Len: n}, access: access, cfg: cfg}
	g, gt, err := joinGroup(pd, s, r)
	if err != nil {
		return nil, fmt.Errorf("pmemsink: register %s: %w", s.info.Path, err)
	}
	r.g, r.gt = g, gt
	ropts := append([]conn.RegOption{conn.WithHooks(r), conn.MayFault()}, cfg.conn...)
	mr, err := pd.Register(s.mem[off:off+n:off+n], access, ropts...)
	if err != nil {
		g.leave(r, s)
		return nil, err
	}
	r.mr = mr
	return r, nil
}

// MR returns the memory region.
func (r *Registration) MR() *conn.MR { return r.mr }

// Sink returns the sink.
func (r *Registration) Sink() *Sink { return r.s }

// Window returns the range of the sink the region maps: region byte i is
// sink byte Window().Off + i.
func (r *Registration) Window() Range { return r.win }

// Stats returns the counters of the connection's tracker of this sink
// (shared by the registrations of the sink in one protection domain).
func (r *Registration) Stats() TrackerStats { return r.gt.tr.Stats() }

// writable reports whether the peer may write the region.
func (r *Registration) writable() bool { return r.access&conn.RemoteWrite != 0 }

// CommonData returns what librpma 1.2's example servers send in their
// connection private data for this region (rpma.CommonData, 28 bytes):
// the MR descriptor (base tagged offset, length, STag, usage) and the
// peer-config byte. usage is WRITE_DST | READ_SRC | FLUSH_TYPE_VISIBILITY
// (0x19), with FLUSH_TYPE_PERSISTENT and direct_write_to_pmem = 1 (0x39)
// only when the sink is Durable: then every way a librpma client flushes
// (rpma_flush's 8-byte Read, GPSPM) is answered after a real persist. A
// region the peer may not write offers READ_SRC | FLUSH_TYPE_VISIBILITY
// (0x11) and never direct_write_to_pmem. dataOffset (8-aligned, with
// rpma.ExampleDataLen bytes after it in the region) is where the example
// clients put their data.
func (r *Registration) CommonData(dataOffset uint16) (rpma.CommonData, error) {
	ra := r.mr.Remote(0)
	durable := r.s.Durable() && r.writable()
	cd, err := rpma.SinkCommonData(ra.TO, r.win.Len, uint32(ra.STag), dataOffset, durable)
	if err != nil {
		return cd, err
	}
	if !r.writable() {
		cd.MR.Usage = rpma.UsageReadSrc | rpma.UsageFlushTypeVisibility
	}
	return cd, nil
}

// Close deregisters the region, which ends every access of a peer to it
// still under way (that connection receives a Terminate), waits for the
// persists queued for the connection (they finish; their acknowledgements
// go nowhere if the connection has ended), and, if it was the last
// registration of the sink in its protection domain, detaches the tracker,
// which persists what is still dirty. It is safe to call more than once.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() {
		var err error
		if r.mr != nil {
			err = r.mr.Deregister()
		}
		r.closeErr = errors.Join(err, r.g.leave(r, r.s))
	})
	return r.closeErr
}

// The conn hooks. They run on the receive token holder of the connection,
// in stream order, and never block: what needs a persist goes to the
// protection domain's worker.

// Placed records a placement as dirty.
func (r *Registration) Placed(_ *conn.QP, off, n int) {
	o := r.win.Off + uint64(off)
	if r.cfg.obs != nil {
		// Before the tracker hears of it: a persist running meanwhile on
		// the worker may take the range at once, and the bytes it writes
		// back are already the new ones.
		r.cfg.obs.placed(r.cfg.obsIdx, o, uint64(n))
	}
	r.gt.tr.Placed(o, uint64(n))
}

// ReadRequested answers at once if the connection has nothing dirty in any
// sink, and otherwise has the worker persist everything first.
func (r *Registration) ReadRequested(_ *conn.QP, _, _ int, rel conn.ReadRelease) {
	id := r.observeFlush(kindRead, 0, 0)
	if r.g.clean() || r.hooks().readNoPersist {
		r.observeAck(id)
		rel.Release(nil)
		return
	}
	r.g.push(job{kind: kindRead, r: r, read: rel, obsID: id})
}

// FlushRequested persists the range named (this connection's writes in
// it) before the response. A flush that asks for visibility only is
// answered at once: every earlier placement is in the mapping.
func (r *Registration) FlushRequested(_ *conn.QP, off, n int, persist bool, rel conn.FlushRelease) {
	if !persist {
		rel.Release(false, nil)
		return
	}
	o := r.win.Off + uint64(off)
	if r.hooks().flushNoBase {
		o = uint64(off)
	}
	id := r.observeFlush(kindFlush, r.win.Off+uint64(off), uint64(n))
	r.g.push(job{kind: kindFlush, r: r, off: o, n: uint64(n), flush: rel, obsID: id})
}

// GPSPMResponder is told the outcome of a GPSPM flush request: the
// response to send, once the range is persistent, or the error that must
// end the connection (the persist failed). It is called from the worker
// goroutine of the protection domain and may block briefly (for a send
// buffer).
type GPSPMResponder func(resp rpma.FlushResponse, err error)

// ErrGPSPMRange is what GPSPM returns for a flush request whose range does
// not lie inside the region.
var ErrGPSPMRange = errors.New("pmemsink: GPSPM flush request outside the region")

// ErrReadOnly is what GPSPM returns on a region the peer may not write.
var ErrReadOnly = errors.New("pmemsink: flush request for a region the peer may not write")

// GPSPM handles msg, the bytes of one Send the peer sent (the receive
// completion's length), as librpma's GPSPM example server does: it parses
// a GPSPM_flush_request (rpma.ParseFlushRequest), checks that [offset,
// offset+length) lies inside the region (offsets are relative to the
// region's first byte, like the example's), and has the worker persist
// that range, whoever wrote it, before it calls done with the response.
// It does not block and does not allocate; call it where the receive
// completes (a completion handler), after which msg's buffer may be reused.
//
// A message that does not parse, a range outside the region, or a region
// the peer may not write returns an error, persists nothing and never
// calls done: such a request must not be answered as a success, so end the
// connection (the peer would otherwise wait for a response that never
// comes).
func (r *Registration) GPSPM(msg []byte, done GPSPMResponder) error {
	req, err := rpma.ParseFlushRequest(msg)
	if err != nil {
		return err
	}
	if !r.writable() {
		return ErrReadOnly
	}
	if req.Length > r.win.Len || req.Offset > r.win.Len-req.Length {
		return fmt.Errorf("%w: [%d, +%d) of a %d-byte region", ErrGPSPMRange, req.Offset, req.Length, r.win.Len)
	}
	o := r.win.Off + req.Offset
	id := r.observeFlush(kindGPSPM, o, req.Length)
	r.g.push(job{kind: kindGPSPM, r: r, off: o, n: req.Length, ctx: req.OpContext, gpspm: done, obsID: id})
	return nil
}

func (r *Registration) hooks() *testHooks {
	if h := r.s.cfg.hooks; h != nil {
		return h
	}
	return &noHooks
}

var noHooks testHooks

func (r *Registration) observeFlush(k flushKind, off, n uint64) int {
	if r.cfg.obs == nil {
		return -1
	}
	return r.cfg.obs.flushed(r.cfg.obsIdx, k, off, n)
}

func (r *Registration) observeAck(id int) {
	if r.cfg.obs != nil && id >= 0 {
		r.cfg.obs.acked(id)
	}
}

// observer is told what the target does, for the crash simulator driven
// over the network (tests only): placements, flushes received,
// acknowledgements sent.
type observer interface {
	placed(conn int, off, n uint64)
	flushed(conn int, k flushKind, off, n uint64) int
	acked(id int)
}

// withObserver instruments a registration for the crash simulator; conn
// names the connection in the observer's records.
func withObserver(o observer, connIdx int) RegisterOption {
	return func(c *regOptions) { c.obs, c.obsIdx = o, connIdx }
}

type flushKind uint8

const (
	kindRead  flushKind = iota + 1 // an RDMA Read: read-after-write
	kindFlush                      // a Flush Request for a range
	kindGPSPM                      // a GPSPM flush request
)
