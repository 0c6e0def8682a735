package pmemsink

import (
	"context"
	"errors"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// InitiatorOption configures Dial.
type InitiatorOption func(*initConfig)

type initConfig struct {
	connOpts []conn.Option
	gpspm    bool
	method   Method
	staging  int
	device   *conn.Device
}

// WithConnOptions passes options to the connection's setup.
func WithConnOptions(opts ...conn.Option) InitiatorOption {
	return func(c *initConfig) { c.connOpts = append(c.connOpts, opts...) }
}

// WithGPSPM declares that the target answers GPSPM flush requests
// (iwarp-go's sink and librpma's example 09 server do; a librpma
// descriptor cannot say so). Flush then uses GPSPM toward a target without
// the Flush extension, and a receive for its responses is posted before
// the connection is set up. Toward a librpma server that does not answer
// GPSPM (examples 04, 05, 07) it must not be given: a Send that finds no
// receive posted ends the connection. Example 09's server answers exactly
// one request per connection.
func WithGPSPM() InitiatorOption { return func(c *initConfig) { c.gpspm = true } }

// WithMethod makes Flush use m unless a flush names its own (UseMethod).
// MethodGPSPM implies WithGPSPM.
func WithMethod(m Method) InitiatorOption { return func(c *initConfig) { c.method = m } }

// WithStaging sets the size of the registered buffer Write and Read move
// data through (default 4 MiB, at least 64 KiB). One RDMA Write or Read
// carries at most a quarter of it.
func WithStaging(n int) InitiatorOption { return func(c *initConfig) { c.staging = max(n, 64<<10) } }

// WithDevice creates the initiator's protection domain on d.
func WithDevice(d *conn.Device) InitiatorOption { return func(c *initConfig) { c.device = d } }

// FlushOption adjusts one Flush. It is a plain value, so that passing one
// does not allocate.
type FlushOption struct {
	method  Method
	require bool
	whole   bool
}

// UseMethod makes the flush use m instead of the best method.
func UseMethod(m Method) FlushOption { return FlushOption{method: m} }

// RequirePersistent makes a flush that did not get the target's word that
// the bytes are persistent fail with ErrNotPersistent.
func RequirePersistent() FlushOption { return FlushOption{require: true} }

// WholeRegion makes the flush cover the whole region; its offset and
// length are ignored.
func WholeRegion() FlushOption { return FlushOption{whole: true} }

// The initiator's queues.
const (
	initSendDepth = 128
	initRecvDepth = 1
	// Message buffer layout: the GPSPM request, the receive for its
	// response, the 8 bytes a read-after-write flush reads into.
	msgSend    = 0
	msgRecv    = rpma.MessageSizeMax
	msgScratch = 2 * rpma.MessageSizeMax
	msgLen     = msgScratch + 8
)

// Initiator writes into a target's region, reads it back and makes its
// writes durable: one connection to a sink Server (or to any target that
// sends librpma's descriptor blob in its MPA Reply), with the region the
// blob describes.
//
// Toward a librpma server (librpma 1.2's example servers 04, 05, 07, 09)
// the blob is all the initiator knows: there is no Flush extension, Flush
// reads after writing unless GPSPM was named (WithMethod), and it reports
// Persistent only where the descriptor declared it (Remote.Declares).
// What the descriptor does not offer fails with ErrNotOffered before
// anything is sent.
//
// Write and Read move bytes through a registered staging buffer; Flush
// asks the target to make what this connection wrote durable, by the best
// method the target supports, and says which and what it promises. An
// Initiator is not safe for concurrent use. A Read or Flush that its
// context interrupts while work is in flight leaves the Initiator failed:
// every later call returns that error.
type Initiator struct {
	cfg    initConfig
	pd     *conn.PD
	cq     *conn.CQ
	qp     *conn.QP
	stage  *conn.MR
	msg    *conn.MR
	remote Remote

	// The staging buffer is a ring: byte counters head (next allocation)
	// and tail (oldest still in use); a work request holds the bytes up to
	// its end until it completes.
	head, tail uint64
	maxChunk   int
	// Signalled send-queue work, oldest first (they complete in order).
	pend         [initSendDepth]pending
	pHead, pN    int
	nextID, done uint64
	flushFlags   conn.WCFlags
	flushErr     error
	readDst      []byte
	recvLen      int
	recvGot      bool
	gpspmCtx     uint64
	gpspmOut     bool  // a GPSPM request waits for its response
	err          error // the connection failed: every later call fails
	wcs          [16]conn.WorkCompletion
	sge, rsge    [1]conn.SGE

	// WriteFlush holds its last Write back (hold, then held) so that it
	// leaves with the flush's request in one PostSendBatch.
	hold, holding bool
	held          [2]conn.SendWR
	heldP         pending
	heldSGE       [1]conn.SGE
}

type pending struct {
	id  uint64
	end uint64 // the staging ring's head after this request's bytes
	dst int    // a Read: where its bytes go in readDst; -1 otherwise
	at  uint64 // staging offset of its bytes
	n   int
}

// Dial connects to the target at addr and reads its region from the
// descriptor blob of the MPA Reply.
func Dial(ctx context.Context, network, addr string, opts ...InitiatorOption) (*Initiator, error) {
	cfg := initConfig{staging: 4 << 20}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.method == MethodGPSPM {
		cfg.gpspm = true
	}
	in := &Initiator{cfg: cfg, maxChunk: cfg.staging / 4}
	if cfg.device != nil {
		in.pd = cfg.device.NewPD()
	} else {
		in.pd = conn.NewPD()
	}
	in.cq = conn.NewCQ(initSendDepth + initRecvDepth)
	var err error
	in.qp, err = in.pd.NewQP(in.cq, conn.QPCaps{SendDepth: initSendDepth, RecvDepth: initRecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Initiator, error) {
		_ = in.Close()
		return nil, err
	}
	if in.stage, err = in.pd.Register(make([]byte, cfg.staging), conn.LocalWrite); err != nil {
		return fail(err)
	}
	if in.msg, err = in.pd.Register(make([]byte, msgLen), conn.LocalWrite); err != nil {
		return fail(err)
	}
	if cfg.gpspm {
		if err := in.postRecv(); err != nil {
			return fail(err)
		}
	}
	if err := in.qp.Connect(ctx, network, addr, cfg.connOpts...); err != nil {
		return fail(err)
	}
	if in.remote, err = ParseRemote(in.qp.Negotiated().PeerPrivateData); err != nil {
		return fail(fmt.Errorf("pmemsink: %s sent no region descriptor in its MPA Reply: %w", addr, err))
	}
	return in, nil
}

// Remote returns the target's region.
func (in *Initiator) Remote() Remote { return in.remote }

// QP returns the connection's queue pair.
func (in *Initiator) QP() *conn.QP { return in.qp }

// Method returns the method Flush uses unless told otherwise: the Flush
// extension if the target answers it, else GPSPM if declared (WithGPSPM),
// else read-after-write; or what WithMethod set.
func (in *Initiator) Method() Method {
	switch {
	case in.cfg.method != MethodAuto:
		return in.cfg.method
	case in.qp.PeerFlushes():
		return MethodExtension
	case in.cfg.gpspm:
		return MethodGPSPM
	}
	return MethodReadAfterWrite
}

// Close closes the connection.
func (in *Initiator) Close() error {
	err := in.qp.Close()
	for _, mr := range []*conn.MR{in.stage, in.msg} {
		if mr != nil {
			_ = mr.Deregister()
		}
	}
	return err
}

// Write writes p at region offset off with RDMA Writes (one per quarter of
// the staging buffer) and returns once they are posted: the memory of p
// may be reused at once. A later Flush covers them.
func (in *Initiator) Write(ctx context.Context, off uint64, p []byte) error {
	if err := in.remote.check(off, uint64(len(p))); err != nil {
		return err
	}
	if err := in.writable(); err != nil {
		return err
	}
	for len(p) > 0 {
		n := min(len(p), in.maxChunk)
		at, err := in.alloc(ctx, n)
		if err != nil {
			return err
		}
		copy(in.stage.Bytes()[at:at+uint64(n)], p[:n])
		in.sge[0] = in.stage.SGE(int(at), n)
		if _, err := in.post(ctx, conn.SendWR{Op: conn.OpWrite, Remote: in.remote.Addr(off)}, pending{dst: -1, at: at, n: n}); err != nil {
			return err
		}
		p, off = p[n:], off+uint64(n)
	}
	return nil
}

// WriteUint64 writes v (in the target's byte order, little-endian on
// every librpma platform) at the 8-aligned region offset off with one
// 8-byte RDMA Write that waits for every earlier Read, as librpma's
// rpma_atomic_write does: the target stores it with one 64-bit store.
func (in *Initiator) WriteUint64(ctx context.Context, off, v uint64) error {
	if off%8 != 0 {
		return fmt.Errorf("pmemsink: an atomic write needs an 8-aligned offset, not %d", off)
	}
	if err := in.remote.check(off, 8); err != nil {
		return err
	}
	if err := in.writable(); err != nil {
		return err
	}
	at, err := in.alloc(ctx, 8)
	if err != nil {
		return err
	}
	b := in.stage.Bytes()[at : at+8]
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	in.sge[0] = in.stage.SGE(int(at), 8)
	_, err = in.post(ctx, conn.SendWR{Op: conn.OpWrite, Flags: conn.Fence, Remote: in.remote.Addr(off)}, pending{dst: -1, at: at, n: 8})
	return err
}

// Read reads len(p) bytes at region offset off into p with RDMA Reads.
func (in *Initiator) Read(ctx context.Context, off uint64, p []byte) error {
	if err := in.remote.check(off, uint64(len(p))); err != nil {
		return err
	}
	if err := in.readable("an RDMA Read"); err != nil {
		return err
	}
	in.readDst = p
	defer func() { in.readDst = nil }()
	defer in.interrupted(ctx)
	var last uint64
	for done := 0; done < len(p); {
		n := min(len(p)-done, in.maxChunk)
		at, err := in.alloc(ctx, n)
		if err != nil {
			return err
		}
		in.sge[0] = in.stage.SGE(int(at), n)
		if last, err = in.post(ctx, conn.SendWR{Op: conn.OpRead, Remote: in.remote.Addr(off + uint64(done))}, pending{dst: done, at: at, n: n}); err != nil {
			return err
		}
		done += n
	}
	return in.waitFor(ctx, last)
}

// Flush makes the bytes this connection wrote in [off, off+n) durable by
// the best method the target supports (Method), waits for the target's
// answer, and reports the method used and what the answer promises:
// Persistent only when the target declared it (its Flush Response said so,
// or its descriptor declares the method persistent, Remote.Declares);
// otherwise Placed. With RequirePersistent, a Placed outcome returns
// ErrNotPersistent with the result.
//
// A read-after-write flush names no range at the wire (it reads 8 bytes
// at off) and covers everything the connection wrote before it; a GPSPM
// flush covers the whole range, whoever wrote it.
func (in *Initiator) Flush(ctx context.Context, off, n uint64, opts ...FlushOption) (FlushResult, error) {
	fc := FlushOption{method: in.Method()}
	for _, o := range opts {
		if o.method != MethodAuto {
			fc.method = o.method
		}
		fc.require = fc.require || o.require
		fc.whole = fc.whole || o.whole
	}
	if fc.whole {
		off, n = 0, in.remote.Size
	}
	if err := in.remote.check(off, n); err != nil {
		return FlushResult{}, err
	}
	defer in.interrupted(ctx)
	res := FlushResult{Method: fc.method, Guarantee: Placed}
	var err error
	switch fc.method {
	case MethodExtension:
		wr := conn.SendWR{Op: conn.OpFlush, Remote: in.remote.Addr(off), FlushLength: n}
		if fc.whole {
			wr.Flags |= conn.FlushRegion
		}
		var id uint64
		if id, err = in.post(ctx, wr, pending{dst: -1}); err == nil {
			if err = in.waitFor(ctx, id); err == nil {
				err = in.flushErr
			}
		}
		if err == nil && in.flushFlags&conn.WCFlushPersistent != 0 {
			res.Guarantee = Persistent
		}
	case MethodGPSPM:
		err = in.flushGPSPM(ctx, off, n)
	case MethodReadAfterWrite:
		err = in.flushRead(ctx, off)
	default:
		return FlushResult{}, fmt.Errorf("pmemsink: flush method %v", fc.method)
	}
	if err != nil {
		return FlushResult{}, err
	}
	if fc.method != MethodExtension && in.remote.Declares(fc.method) {
		res.Guarantee = Persistent
	}
	if fc.require && res.Guarantee != Persistent {
		return res, in.notPersistent(fc.method)
	}
	return res, nil
}

// notPersistent explains ErrNotPersistent by what the descriptor declared.
func (in *Initiator) notPersistent(m Method) error {
	r := in.remote
	why := ""
	switch m {
	case MethodReadAfterWrite:
		why = fmt.Sprintf("; the descriptor declares usage %v, direct_write_to_pmem %v", r.Usage, r.DirectWriteToPmem)
		if r.gpspmShaped() && r.Usage&rpma.UsageFlushTypePersistent != 0 {
			why += " and is shaped like librpma's GPSPM example server's, whose GPSPM flushes persist: dial with WithMethod(MethodGPSPM) (iwarp-peer put --method gpspm)"
		}
	case MethodGPSPM:
		why = fmt.Sprintf("; the descriptor declares usage %v", r.Usage)
	}
	return fmt.Errorf("%w (%v flush%s)", ErrNotPersistent, m, why)
}

func (in *Initiator) writable() error {
	if !in.remote.Writable() {
		return fmt.Errorf("%w: an RDMA Write into a region of usage %v (no WRITE_DST)", ErrNotOffered, in.remote.Usage)
	}
	return nil
}

func (in *Initiator) readable(what string) error {
	if !in.remote.Readable() {
		return fmt.Errorf("%w: %s of a region of usage %v (neither READ_SRC nor a FLUSH_TYPE)", ErrNotOffered, what, in.remote.Usage)
	}
	return nil
}

// WriteFlush writes p at region offset off and flushes [off, off+len(p)),
// as Write followed by Flush does, but posts the last RDMA Write and the
// flush's request together: they leave in one system call and the
// target usually reads them in one, a system call and a wake-up less on
// each side of a durable write.
func (in *Initiator) WriteFlush(ctx context.Context, off uint64, p []byte, opts ...FlushOption) (FlushResult, error) {
	if len(p) == 0 {
		return in.Flush(ctx, off, 0, opts...)
	}
	if err := in.remote.check(off, uint64(len(p))); err != nil {
		return FlushResult{}, err
	}
	last := (len(p) - 1) / in.maxChunk * in.maxChunk
	if err := in.Write(ctx, off, p[:last]); err != nil {
		return FlushResult{}, err
	}
	in.hold = true
	err := in.Write(ctx, off+uint64(last), p[last:])
	in.hold = false
	if err != nil {
		return FlushResult{}, err
	}
	res, err := in.Flush(ctx, off, uint64(len(p)), opts...)
	if in.holding {
		// Flush failed before it posted (a bad method, say): the
		// Write goes out alone.
		in.holding = false
		if perr := in.submit(in.held[:1], [2]pending{in.heldP}); perr != nil && err == nil {
			err = perr
		}
	}
	return res, err
}

// submit posts wrs (the held Write, and the flush's request if any) and
// records them, ps[i] for wrs[i]. A failure to post leaves the initiator
// failed: only a broken queue pair refuses a post.
func (in *Initiator) submit(wrs []conn.SendWR, ps [2]pending) error {
	n, err := in.qp.PostSendBatch(wrs)
	for i := range n {
		in.pend[(in.pHead+in.pN)%len(in.pend)] = ps[i]
		in.pN++
	}
	if err != nil {
		in.err = err
	}
	return err
}

// interrupted fails the initiator for good when ctx ended a Read or a
// Flush while it waited: its work is still in flight, and its answer would
// arrive into the next call.
func (in *Initiator) interrupted(ctx context.Context) {
	if in.err == nil && ctx.Err() != nil && (in.pN > 0 || in.recvPending()) {
		in.err = fmt.Errorf("pmemsink: initiator unusable: a read or flush was interrupted with work in flight: %w", context.Cause(ctx))
	}
}

// recvPending reports whether a GPSPM response may still arrive.
func (in *Initiator) recvPending() bool { return in.gpspmOut }

// flushRead is librpma 1.2's rpma_flush: an 8-byte RDMA Read at the
// flushed offset (moved back to fit a region's end).
func (in *Initiator) flushRead(ctx context.Context, off uint64) error {
	if err := in.readable("a read-after-write flush"); err != nil {
		return err
	}
	n := uint64(8)
	if in.remote.Size < n {
		off, n = 0, in.remote.Size
	} else if off > in.remote.Size-n {
		off = in.remote.Size - n
	}
	in.sge[0] = in.msg.SGE(msgScratch, int(n))
	id, err := in.post(ctx, conn.SendWR{Op: conn.OpRead, Remote: in.remote.Addr(off)}, pending{dst: -1})
	if err != nil {
		return err
	}
	return in.waitFor(ctx, id)
}

// ErrGPSPMNotDeclared is the error of a GPSPM flush on an initiator set up
// without WithGPSPM: no receive for the response was posted.
var ErrGPSPMNotDeclared = errors.New("pmemsink: GPSPM flush without WithGPSPM")

// flushGPSPM sends a GPSPM_flush_request and waits for the response that
// echoes its op_context.
func (in *Initiator) flushGPSPM(ctx context.Context, off, n uint64) error {
	if !in.cfg.gpspm {
		return ErrGPSPMNotDeclared
	}
	in.gpspmCtx++
	req := rpma.FlushRequest{Offset: off, Length: n, OpContext: in.gpspmCtx}
	b := in.msg.Bytes()
	enc := req.Append(b[msgSend:msgSend:msgRecv])
	in.sge[0] = in.msg.SGE(msgSend, len(enc))
	id, err := in.post(ctx, conn.SendWR{Op: conn.OpSend}, pending{dst: -1})
	if err != nil {
		return err
	}
	in.gpspmOut = true
	// The send buffer is reused by the next request: wait for the Send's
	// completion too.
	for !in.recvGot || in.done < id {
		if err := in.reap(ctx); err != nil {
			return err
		}
	}
	in.recvGot, in.gpspmOut = false, false
	resp, err := rpma.ParseFlushResponse(b[msgRecv : msgRecv+in.recvLen])
	if err == nil && resp.OpContext != req.OpContext {
		err = fmt.Errorf("pmemsink: GPSPM response for op_context %d, want %d", resp.OpContext, req.OpContext)
	}
	if err != nil {
		in.err = err
		_ = in.qp.Abort()
		return err
	}
	return in.postRecv()
}

func (in *Initiator) postRecv() error {
	in.rsge[0] = in.msg.SGE(msgRecv, rpma.MessageSizeMax)
	return in.qp.PostRecv(conn.RecvWR{SGL: in.rsge[:]})
}

// alloc returns the staging offset of n free bytes, waiting for earlier
// work to complete if the ring is full.
func (in *Initiator) alloc(ctx context.Context, n int) (uint64, error) {
	size := uint64(len(in.stage.Bytes()))
	for {
		if in.head == in.tail {
			// Empty: start over at the ring's start.
			in.head = alignUp(in.head, size)
			in.tail = in.head
		}
		pos := in.head % size
		skip := uint64(0)
		if pos+uint64(n) > size {
			skip = size - pos
		}
		if in.head-in.tail+skip+uint64(n) <= size {
			in.head += skip + uint64(n)
			return (pos + skip) % size, nil
		}
		if err := in.reap(ctx); err != nil {
			return 0, err
		}
	}
}

// post posts wr (its SGL: in.sge, if the operation takes one) signalled,
// and records it. It returns the work request's ID.
func (in *Initiator) post(ctx context.Context, wr conn.SendWR, p pending) (uint64, error) {
	if in.err != nil {
		return 0, in.err
	}
	need := 1
	if in.holding {
		need = 2
	}
	for in.pN+need > len(in.pend) {
		if err := in.reap(ctx); err != nil {
			return 0, err
		}
	}
	in.nextID++
	wr.ID = in.nextID
	wr.Flags |= conn.Signaled
	switch wr.Op {
	case conn.OpWrite, conn.OpRead, conn.OpSend:
		wr.SGL = in.sge[:]
	}
	p.id, p.end = wr.ID, in.head
	switch {
	case in.hold:
		in.hold, in.holding = false, true
		in.heldSGE = in.sge
		wr.SGL = in.heldSGE[:]
		in.held[0], in.heldP = wr, p
		return wr.ID, nil
	case in.holding:
		in.holding = false
		in.held[1] = wr
		if err := in.submit(in.held[:], [2]pending{in.heldP, p}); err != nil {
			return 0, err
		}
		return wr.ID, nil
	}
	if err := in.qp.PostSend(wr); err != nil {
		in.nextID--
		return 0, err
	}
	in.pend[(in.pHead+in.pN)%len(in.pend)] = p
	in.pN++
	return wr.ID, nil
}

// waitFor reaps completions until work request id has completed.
func (in *Initiator) waitFor(ctx context.Context, id uint64) error {
	for in.done < id {
		if err := in.reap(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reap waits for completions and processes them.
func (in *Initiator) reap(ctx context.Context) error {
	if in.err != nil {
		return in.err
	}
	n := in.cq.Poll(in.wcs[:])
	if n == 0 {
		var err error
		if n, err = in.cq.Wait(ctx, in.wcs[:]); err != nil {
			return err
		}
	}
	for i := range in.wcs[:n] {
		wc := &in.wcs[i]
		err := wc.Err()
		if err != nil && !isFlushFailure(wc.Op, err) {
			// The connection has failed; a failed persist at the
			// target (a FlushError) is the flush's own outcome.
			in.err = err
			return err
		}
		if wc.Op == conn.WCRecv {
			in.recvLen, in.recvGot = int(wc.ByteLen), true
			continue
		}
		if in.pN == 0 || in.pend[in.pHead].id != wc.ID {
			in.err = fmt.Errorf("pmemsink: completion of work request %d out of order", wc.ID)
			return in.err
		}
		p := &in.pend[in.pHead]
		if p.dst >= 0 && in.readDst != nil {
			copy(in.readDst[p.dst:p.dst+p.n], in.stage.Bytes()[p.at:p.at+uint64(p.n)])
		}
		in.tail = max(in.tail, p.end)
		in.done = wc.ID
		if wc.Op == conn.WCFlush {
			in.flushFlags, in.flushErr = wc.Flags, err
		}
		in.pHead = (in.pHead + 1) % len(in.pend)
		in.pN--
	}
	return nil
}

func isFlushFailure(op conn.WCOpcode, err error) bool {
	var fe *conn.FlushError
	return op == conn.WCFlush && errors.As(err, &fe)
}
