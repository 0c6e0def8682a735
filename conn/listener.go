package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
)

// Listener accepts iWARP connections: it accepts TCP connections, reads
// each one's MPA Request (bounded by the setup timeout, concurrently, so a
// slow or silent peer holds up nobody) and queues the requests for
// AcceptRequest.
//
// What a burst of hostile clients can take is bounded by options with
// defaults: MPA Requests read at once (WithMaxHandshakes), requests
// waiting for AcceptRequest (WithBacklog) and how long they wait
// (WithRequestTimeout: a request that waits longer is dropped), connections
// from the listener alive at once (WithMaxConnections, unlimited by
// default), and protection failures per remote address
// (WithProtectionFailureLimit). A queued request whose initiator closes or
// resets its connection, or sends anything before the Reply, is dropped at
// once: AcceptRequest hands out only live ones.
type Listener struct {
	ln   net.Listener
	base config

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	sem    chan struct{} // bounds handshakes in progress
	wg     sync.WaitGroup
	once   sync.Once
	log    *limitedLog
	guard  *protectionGuard

	mu    sync.Mutex
	queue []*ConnRequest // waiting for AcceptRequest, oldest first
	live  int            // accepted connections not yet ended
	ready chan struct{}  // capacity 1: the queue became non-empty
	stats ListenerStats
}

// ListenerStats counts what a listener turned away.
type ListenerStats struct {
	Accepted          uint64 // TCP connections accepted
	HandshakesRefused uint64 // closed at once: too many MPA Requests being read
	ConnectionsCapped uint64 // closed at once: WithMaxConnections reached
	AddressBlocked    uint64 // closed at once: the address exceeded its protection-failure limit
	BadRequests       uint64 // no valid MPA Request within the setup timeout
	BacklogFull       uint64 // a valid Request with the backlog full
	Dead              uint64 // queued requests whose initiator went away or spoke first
	Expired           uint64 // queued requests older than the request timeout
	Rejected          uint64 // requests the application rejected (ConnRequest.Reject)
	TLSFailed         uint64 // WithTLS: no TLS handshake within the setup timeout, or a failed one
	TLSRequired       uint64 // WithTLS: a plain MPA Request, rejected as needing TLS
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Listener defaults.
const (
	DefaultBacklog        = 1024
	DefaultMaxHandshakes  = 1024
	DefaultRequestTimeout = 10 * time.Second
)

// ErrListenerClosed is returned by AcceptRequest after Close.
var ErrListenerClosed = errors.New("iwarp: listener closed")

// Listen listens on addr for iWARP connections. opts are the defaults for
// every connection accepted; ConnRequest.Accept may add more.
func Listen(ctx context.Context, network, addr string, opts ...Option) (*Listener, error) {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return newListener(ln, cfg), nil
}

// NewListener accepts iWARP connections on an existing listener, which the
// Listener owns from then on.
func NewListener(ln net.Listener, opts ...Option) (*Listener, error) {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return nil, err
	}
	return newListener(ln, cfg), nil
}

func newListener(ln net.Listener, cfg config) *Listener {
	l := &Listener{
		ln:    ln,
		base:  cfg,
		sem:   make(chan struct{}, cfg.maxHandshakes),
		ready: make(chan struct{}, 1),
		log:   newLimitedLog(cfg.logger),
		guard: newProtectionGuard(cfg.protFailures, cfg.protWindow),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off a little.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		if why := l.admit(c); why != "" {
			l.log.refused(c.RemoteAddr(), why)
			c.Close()
			continue
		}
		select {
		case l.sem <- struct{}{}:
		default:
			l.count(func(s *ListenerStats) { s.HandshakesRefused++ })
			l.log.refused(c.RemoteAddr(), "too many MPA Requests being read")
			c.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// admit decides at once whether a new TCP connection may go on; it returns
// why not.
func (l *Listener) admit(c net.Conn) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Accepted++
	if l.guard.blocked(c.RemoteAddr(), time.Now()) {
		l.stats.AddressBlocked++
		return "address over its protection-failure limit"
	}
	if max := l.base.maxConns; max > 0 && l.live+len(l.queue) >= max {
		l.stats.ConnectionsCapped++
		return fmt.Sprintf("%d connections already", max)
	}
	return ""
}

func (l *Listener) count(f func(*ListenerStats)) {
	l.mu.Lock()
	f(&l.stats)
	l.mu.Unlock()
}

// handshake reads the MPA Request, queues it, then watches the queued
// connection until AcceptRequest takes it, the initiator goes away, or it
// has waited too long.
func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	cr, err := serve(l.ctx, c, l.base)
	<-l.sem // the Request is read: the handshake slot is free
	if err != nil {
		l.count(func(s *ListenerStats) {
			switch {
			case errors.Is(err, ErrTLSHandshake):
				s.TLSFailed++
			case errors.Is(err, ErrTLSRequired):
				s.TLSRequired++
			default:
				s.BadRequests++
			}
		})
		l.log.refused(c.RemoteAddr(), err.Error())
		c.Close()
		return
	}
	cr.l = l
	cr.watched = make(chan struct{})
	l.mu.Lock()
	if len(l.queue) >= l.base.backlog || l.ctx.Err() != nil {
		l.stats.BacklogFull++
		l.mu.Unlock()
		l.log.refused(c.RemoteAddr(), "backlog full")
		c.Close()
		return
	}
	cr.queuedAt = time.Now()
	// The age limit is set before the request can be taken, so that
	// take's cut (a deadline of now) always comes after it.
	cr.c.SetReadDeadline(cr.queuedAt.Add(l.base.requestTimeout))
	l.queue = append(l.queue, cr)
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default:
	}
	cr.watch()
}

// watch waits, with a read that the initiator may not satisfy before the
// Reply, until AcceptRequest takes the request (it cuts the read short),
// the initiator closes, resets or speaks first, the request times out, or
// the listener closes. Whoever settles the request's owner first wins.
func (cr *ConnRequest) watch() {
	defer close(cr.watched)
	var one [1]byte
	n, err := cr.c.Read(one[:])
	if !cr.owner.CompareAndSwap(reqQueued, reqDropped) {
		cr.watchN, cr.watchErr = n, err // AcceptRequest took it: it judges
		return
	}
	l := cr.l
	l.mu.Lock()
	for i, q := range l.queue {
		if q == cr {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			break
		}
	}
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	if timedOut {
		l.stats.Expired++
	} else {
		l.stats.Dead++
	}
	l.mu.Unlock()
	if timedOut {
		l.log.refused(cr.c.RemoteAddr(), "request not accepted in time")
	}
	cr.c.Close()
}

// Owner states of a queued request.
const (
	reqQueued  int32 = iota
	reqTaken         // by AcceptRequest
	reqDropped       // by its watcher
)

// take claims cr for AcceptRequest; false if it is dead or gone. Called
// without l.mu.
func (cr *ConnRequest) take() bool {
	if !cr.owner.CompareAndSwap(reqQueued, reqTaken) {
		return false
	}
	cr.c.SetReadDeadline(time.Now()) // end the watch
	<-cr.watched
	var ne net.Error
	alive := cr.watchN == 0 && (cr.watchErr == nil || errors.As(cr.watchErr, &ne) && ne.Timeout())
	if !alive {
		cr.l.count(func(s *ListenerStats) { s.Dead++ })
		cr.c.Close()
		return false
	}
	cr.c.SetReadDeadline(time.Time{})
	return true
}

// serve reads the MPA Request on c, inside TLS with WithTLS; the setup
// timeout bounds both.
func serve(ctx context.Context, c net.Conn, cfg config) (*ConnRequest, error) {
	if err := tuneSocket(c, &cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	if cfg.tls != nil {
		tc, err := serverTLS(ctx, c, &cfg)
		if err != nil {
			return nil, err
		}
		c = tc
	}
	c = tapped(c, &cfg)
	req, err := mpa.ReadRequest(ctx, c, &cfg.mpa)
	if err != nil {
		return nil, fmt.Errorf("iwarp: reading the MPA request: %w", err)
	}
	app, peer := splitPeerTrailer(req.Frame.PrivateData)
	return &ConnRequest{c: c, req: req, cfg: cfg, privateData: app, peer: peer}, nil
}

// AcceptRequest waits for the next connection request, the oldest live
// one first. The caller inspects it (PrivateData) and must call Accept or
// Reject.
func (l *Listener) AcceptRequest(ctx context.Context) (*ConnRequest, error) {
	for {
		l.mu.Lock()
		var cr *ConnRequest
		if len(l.queue) > 0 {
			cr = l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
		}
		more := len(l.queue) > 0
		l.mu.Unlock()
		if more {
			select {
			case l.ready <- struct{}{}:
			default:
			}
		}
		if cr != nil {
			if cr.take() {
				return cr, nil
			}
			continue
		}
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.ctx.Done():
			return nil, ErrListenerClosed
		}
	}
}

// Accept accepts the next connection request with qp.
func (l *Listener) Accept(ctx context.Context, qp *QP, opts ...Option) error {
	cr, err := l.AcceptRequest(ctx)
	if err != nil {
		return err
	}
	return cr.Accept(ctx, qp, opts...)
}

// Close stops listening, drops connections whose setup is in progress or
// that wait for AcceptRequest, and waits for its goroutines to end.
// Connections already accepted are not affected.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		err = l.ln.Close()
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, cr := range q {
			cr.c.Close() // its watcher ends
		}
		l.wg.Wait()
	})
	return err
}

// ended is told when a connection accepted from the listener ended.
func (l *Listener) ended(remote net.Addr, err error) {
	l.mu.Lock()
	l.live--
	blocked := l.guard.note(remote, err, time.Now())
	l.mu.Unlock()
	if blocked {
		l.log.blocked(remote, l.guard.limit, l.guard.window)
	}
}

// Server reads an MPA Request on an established connection c (the
// responder's side of Client). The caller then accepts or rejects it.
func Server(ctx context.Context, c net.Conn, opts ...Option) (*ConnRequest, error) {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return nil, err
	}
	return serve(ctx, adoptTLS(c), cfg)
}

// ConnRequest is a connection request (an MPA Request) waiting for the
// application's decision.
type ConnRequest struct {
	c           net.Conn
	req         *mpa.Request
	cfg         config
	privateData []byte
	peer        peerInfo
	used        atomic.Bool

	// Set for requests a Listener queued.
	l        *Listener
	queuedAt time.Time
	owner    atomic.Int32
	watched  chan struct{} // closed when the watcher is done
	watchN   int           // what the watch read saw, for take
	watchErr error
}

// ErrRequestUsed is returned by a second Accept or Reject.
var ErrRequestUsed = errors.New("iwarp: connection request already answered")

// PrivateData returns the initiator's private data.
func (r *ConnRequest) PrivateData() []byte { return r.privateData }

// PeerIsIwarpGo reports whether the initiator is an iwarp-go peer.
func (r *ConnRequest) PeerIsIwarpGo() bool { return r.peer.isGo }

// Request returns the MPA Request as received.
func (r *ConnRequest) Request() mpa.Frame { return r.req.Frame }

// RemoteAddr returns the initiator's address.
func (r *ConnRequest) RemoteAddr() net.Addr { return r.c.RemoteAddr() }

// LocalAddr returns the local address of the connection.
func (r *ConnRequest) LocalAddr() net.Addr { return r.c.LocalAddr() }

// Accept connects qp to the initiator. qp starts receiving before the MPA
// Reply goes out, so the initiator may send at once; qp itself sends
// nothing before the initiator's first FPDU (its RTR in peer-to-peer mode).
// opts are added to the listener's.
func (r *ConnRequest) Accept(ctx context.Context, qp *QP, opts ...Option) error {
	if !r.used.CompareAndSwap(false, true) {
		return ErrRequestUsed
	}
	cfg, err := buildConfig(r.cfg, opts)
	if err == nil && cfg.tls != r.cfg.tls {
		err = badOption("WithTLS on Accept: the TLS handshake comes before the request; give it to Listen or Server")
	}
	if err != nil {
		r.c.Close()
		return err
	}
	if err := qp.beginSetup(nil); err != nil {
		r.c.Close()
		return err
	}
	if !qp.setSetupConn(r.c) {
		r.c.Close()
		return qp.setupFailed(ErrQPClosed)
	}
	pd := cfg.privateData
	if r.peer.isGo {
		pd = appendPeerTrailer(pd)
		cfg.mpa.PeerIsIwarpGo = true
	}
	reply, res, err := mpa.AnswerRequest(&cfg.mpa, &r.req.Frame, pd)
	if err != nil {
		if reply.Kind != 0 {
			if b, aerr := mpa.AppendFrame(nil, &reply); aerr == nil {
				r.c.SetWriteDeadline(time.Now().Add(terminateTimeout))
				r.c.Write(b)
			}
		}
		r.c.Close()
		return qp.setupFailed(fmt.Errorf("iwarp: accepting: %w", err))
	}
	b, err := mpa.AppendFrame(nil, &reply)
	if err != nil {
		r.c.Close()
		return qp.setupFailed(err)
	}
	res.PeerPrivateData = r.privateData
	e := newEngine(qp, r.c, &res, &cfg, r.peer)
	if l := r.l; l != nil {
		l.mu.Lock()
		l.live++
		l.mu.Unlock()
		e.onEnd = l.ended
	}
	e.txOpen = !res.WaitForPeerFPDU
	if !e.txOpen && cfg.responderFirst > 0 {
		// Opted out of RFC 5044 §7.1.2 rule 4 (WithResponderSendFirst).
		e.txTimer = time.AfterFunc(cfg.responderFirst, e.openTx)
	}
	// The Reply goes out under the transmit token so that no FPDU can
	// precede it.
	e.txMu.Lock()
	if err := qp.established(e); err != nil {
		e.txUnlock()
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		r.c.SetWriteDeadline(dl)
	} else {
		r.c.SetWriteDeadline(time.Now().Add(cfg.setupTimeout))
	}
	_, err = r.c.Write(b)
	r.c.SetWriteDeadline(time.Time{})
	if err != nil {
		err = fmt.Errorf("iwarp: sending the MPA reply: %w", err)
		e.fail(connectionLost(err), nil)
	}
	e.txUnlock()
	return err
}

// Reject refuses the connection with an MPA Reply with the R bit set,
// carrying privateData, and closes it.
//
// Reject waits (at most a second, or until ctx ends) for the initiator to
// close the connection before closing it: a siw initiator that sees the
// FIN right behind the Reply can report the reject without its private
// data.
func (r *ConnRequest) Reject(ctx context.Context, privateData []byte) error {
	if !r.used.CompareAndSwap(false, true) {
		return ErrRequestUsed
	}
	defer r.c.Close()
	r.count(func(s *ListenerStats) { s.Rejected++ })
	if err := r.req.Reject(ctx, privateData); err != nil {
		return err
	}
	deadline := time.Now().Add(rejectLinger)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	r.c.SetReadDeadline(deadline)
	io.Copy(io.Discard, io.LimitReader(r.c, 64<<10)) // until the initiator closes
	return nil
}

// count updates the counters of the listener that queued r, if any.
func (r *ConnRequest) count(f func(*ListenerStats)) {
	if l := r.l; l != nil {
		l.mu.Lock()
		f(&l.stats)
		l.mu.Unlock()
	}
}

// rejectLinger bounds Reject's wait for the initiator to close.
const rejectLinger = time.Second
