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
// slow or silent peer holds up nobody) and hands the requests to
// AcceptRequest.
type Listener struct {
	ln   net.Listener
	base config

	reqs   chan *ConnRequest
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	sem    chan struct{} // bounds handshakes in progress
	wg     sync.WaitGroup
	once   sync.Once
}

const (
	listenBacklog       = 128
	maxPendingHandshake = 1024
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
		ln:   ln,
		base: cfg,
		reqs: make(chan *ConnRequest, listenBacklog),
		sem:  make(chan struct{}, maxPendingHandshake),
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
		select {
		case l.sem <- struct{}{}:
		default:
			c.Close() // too many handshakes in progress
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	cr, err := serve(l.ctx, c, l.base)
	if err != nil {
		c.Close()
		return
	}
	select {
	case l.reqs <- cr:
	case <-l.ctx.Done():
		c.Close()
	}
}

// serve reads the MPA Request on c.
func serve(ctx context.Context, c net.Conn, cfg config) (*ConnRequest, error) {
	if err := tuneSocket(c, &cfg); err != nil {
		return nil, err
	}
	c = tapped(c, &cfg)
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	req, err := mpa.ReadRequest(ctx, c, &cfg.mpa)
	if err != nil {
		return nil, fmt.Errorf("iwarp: reading the MPA request: %w", err)
	}
	app, isGo := splitPeerTrailer(req.Frame.PrivateData)
	return &ConnRequest{c: c, req: req, cfg: cfg, privateData: app, peerIsGo: isGo}, nil
}

// AcceptRequest waits for the next connection request. The caller inspects
// it (PrivateData) and must call Accept or Reject.
func (l *Listener) AcceptRequest(ctx context.Context) (*ConnRequest, error) {
	select {
	case cr := <-l.reqs:
		return cr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.ctx.Done():
		return nil, ErrListenerClosed
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
		l.wg.Wait()
		for {
			select {
			case cr := <-l.reqs:
				cr.c.Close()
			default:
				return
			}
		}
	})
	return err
}

// Server reads an MPA Request on an established connection c (the
// responder's side of Client). The caller then accepts or rejects it.
func Server(ctx context.Context, c net.Conn, opts ...Option) (*ConnRequest, error) {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return nil, err
	}
	return serve(ctx, c, cfg)
}

// ConnRequest is a connection request (an MPA Request) waiting for the
// application's decision.
type ConnRequest struct {
	c           net.Conn
	req         *mpa.Request
	cfg         config
	privateData []byte
	peerIsGo    bool
	used        atomic.Bool
}

// ErrRequestUsed is returned by a second Accept or Reject.
var ErrRequestUsed = errors.New("iwarp: connection request already answered")

// PrivateData returns the initiator's private data.
func (r *ConnRequest) PrivateData() []byte { return r.privateData }

// PeerIsIwarpGo reports whether the initiator is an iwarp-go peer.
func (r *ConnRequest) PeerIsIwarpGo() bool { return r.peerIsGo }

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
	if r.peerIsGo {
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
	e := newEngine(qp, r.c, &res, &cfg, r.peerIsGo)
	e.txOpen = !res.WaitForPeerFPDU
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

// rejectLinger bounds Reject's wait for the initiator to close.
const rejectLinger = time.Second
