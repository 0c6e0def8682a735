package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// Dial creates a queue pair in pd and connects it to addr as the MPA
// initiator. It is NewQP followed by Connect.
func Dial(ctx context.Context, network, addr string, pd *PD, cq *CQ, caps QPCaps, opts ...Option) (*QP, error) {
	qp, err := pd.NewQP(cq, caps)
	if err != nil {
		return nil, err
	}
	if err := qp.Connect(ctx, network, addr, opts...); err != nil {
		return nil, err
	}
	return qp, nil
}

// Connect dials addr and runs connection setup as the MPA initiator. ctx
// (and the setup timeout) bound the TCP connect and the MPA exchange. If the
// Reply asks for a peer-to-peer ready-to-receive message, Connect sends it
// before it returns, whatever ctx does meanwhile: closing a peer-to-peer
// connection before its RTR crashes some peers (Linux siw).
//
// On failure the queue pair is unusable: its posted work is flushed.
func (qp *QP) Connect(ctx context.Context, network, addr string, opts ...Option) error {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	if err := qp.beginSetup(cancel); err != nil {
		return err
	}
	var d net.Dialer
	d.KeepAlive = cfg.keepAlive
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return qp.setupFailed(fmt.Errorf("iwarp: connect %s: no TCP connection within %v: %w", addr, qp.setupElapsed(), err))
		}
		return qp.setupFailed(fmt.Errorf("iwarp: connect %s: %w", addr, err))
	}
	return qp.client(ctx, c, &cfg, hostOf(addr))
}

// Client runs connection setup as the MPA initiator over an established
// connection c (any net.Conn: a TCP connection, a TLS connection, one end
// of net.Pipe). The queue pair owns c from then on. A *tls.Conn is taken
// as WithTLS's own streams are (TLSState shows it, Close is bounded);
// WithTLS instead runs the handshake on a TCP connection here.
func (qp *QP) Client(ctx context.Context, c net.Conn, opts ...Option) error {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	if err := qp.beginSetup(cancel); err != nil {
		return err
	}
	return qp.client(ctx, adoptTLS(c), &cfg, hostOf(addrString(c.RemoteAddr())))
}

func (qp *QP) client(ctx context.Context, c net.Conn, cfg *config, host string) error {
	if err := tuneSocket(c, cfg); err != nil {
		c.Close()
		return qp.setupFailed(err)
	}
	if cfg.tls != nil {
		if !qp.setSetupConn(c) {
			c.Close()
			return qp.setupFailed(ErrQPClosed)
		}
		tc, err := clientTLS(ctx, c, cfg.tls, host)
		if err != nil {
			return qp.setupFailed(err)
		}
		c = tc
	}
	c = tapped(c, cfg)
	if !qp.setSetupConn(c) {
		c.Close()
		return qp.setupFailed(ErrQPClosed)
	}
	pd := cfg.privateData
	if !cfg.noTrailer {
		if !cfg.mpa.PeerIsIwarpGo && len(pd)+peerTrailerLen > mpa.SiwMaxPrivateData {
			err := fmt.Errorf("iwarp: connection setup: %w: %d bytes of private data, and iwarp-go's %d-byte peer trailer, exceed the %d bytes a peer that may be siw takes (at most %d with the trailer; WithoutPeerTrailer drops it)",
				mpa.ErrSiwLimit, len(pd), peerTrailerLen, mpa.SiwMaxPrivateData, mpa.SiwMaxPrivateData-peerTrailerLen)
			c.Close()
			return qp.setupFailed(err)
		}
		pd = appendPeerTrailer(pd)
	}
	res, err := mpa.Connect(ctx, c, &cfg.mpa, pd)
	if err != nil {
		var me *mpa.Error
		if errors.As(err, &me) && (me.Code == termcode.MPAInsufficientIRD || me.Code == termcode.MPANoMatchingRTR) {
			// RFC 6581 §9.1, §9.2: an initiator that cannot meet the
			// Reply's IRD/ORD or RTR reports it with a Terminate. Nothing
			// else is: a Reply that is not a valid frame is answered by
			// closing the connection (RFC 5044 §7.1.2 rule 3: the peer may
			// not even speak MPA), and a Reply cut short is a lost
			// connection, reported locally.
			sendSetupTerminate(c, me)
		}
		c.Close()
		if errors.Is(err, mpa.ErrRejected) {
			qp.stats.rejectsRx.Add(1)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return qp.setupFailed(fmt.Errorf("iwarp: connection setup: no MPA Reply from %s within %v: %w", addrString(c.RemoteAddr()), qp.setupElapsed(), err))
		}
		if terr := tlsRejected(err, addrString(c.RemoteAddr())); terr != nil {
			return qp.setupFailed(terr)
		}
		if tlsOf(c) != nil {
			return qp.setupFailed(fmt.Errorf("iwarp: connection setup inside TLS: %w", err))
		}
		return qp.setupFailed(fmt.Errorf("iwarp: connection setup: %w", err))
	}
	app, peer := splitPeerTrailer(res.PeerPrivateData)
	res.PeerPrivateData = app
	e := newEngine(qp, c, res, cfg, peer)
	delay := cfg.firstFPDUDelay
	if delay < 0 {
		delay = DefaultFirstFPDUDelay
		if peer.isGo {
			delay = 0
		}
	}
	if res.SendRTR {
		// The RTR is the first FPDU, and toward siw it must not race its
		// hook-up either; it is sent whatever ctx says, and Close waits
		// for it.
		qp.mu.Lock()
		qp.setupPhase = setupRTR
		qp.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if err := e.sendRTR(cfg.setupTimeout); err != nil {
			c.Close()
			return qp.setupFailed(fmt.Errorf("iwarp: sending the RTR: %w", err))
		}
		e.txOpen = true
	} else if delay > 0 {
		e.txTimer = time.AfterFunc(delay, e.openTx)
	} else {
		e.txOpen = true
	}
	return qp.established(e)
}

// established makes e the queue pair's running connection. A Close that
// came during setup closes it now; the caller then reports ErrQPClosed.
func (qp *QP) established(e *engine) error {
	qp.mu.Lock()
	qp.eng = e
	qp.setupConn, qp.setupCancel = nil, nil
	closing := qp.closeReq
	qp.setState(stateRTS, nil)
	qp.stats.connections.Add(1)
	qp.stats.setupNanos.Add(sinceNanos(qp.setupStart))
	qp.mu.Unlock()
	qp.pd.dev.liveQP(qp)
	e.start()
	qp.tx.Store(e)
	qp.kick()
	if closing {
		e.fail(ErrQPClosed, nil)
		return ErrQPClosed
	}
	return nil
}

// sendRTR sends the RFC 6581 ready-to-receive message negotiated in the
// Reply, as siw builds them: a zero-length RDMA Write to STag 1, TO 0; a
// zero-length Read Request (source STag 1) whose zero-length Read Response
// the receiver consumes; or a zero-length Send.
func (e *engine) sendRTR(timeout time.Duration) error {
	e.c.SetWriteDeadline(time.Now().Add(timeout))
	defer e.c.SetWriteDeadline(time.Time{})
	var hdr []byte
	tx := &e.tx
	switch e.res.RTR {
	case mpa.RTRRead:
		e.orq.push(orqEntry{rtr: true, sinkSTag: 1})
		hdr = rdmap.AppendReadRequest(tx.hdr[:0], tx.rreqMSN, rdmap.ReadRequestFields{SinkSTag: 1, SrcSTag: 1})
		tx.rreqMSN++
	case mpa.RTRSend:
		hdr = rdmap.AppendSend(tx.hdr[:0], rdmap.OpSend, true, 0, tx.sendMSN, 0)
		tx.sendMSN++
	default:
		hdr = rdmap.AppendWrite(tx.hdr[:0], true, 1, 0)
	}
	if err := tx.w.WriteFPDU(hdr); err != nil {
		return err
	}
	e.qp.stats.countTx(rdmap.ControlOpcode(hdr[1]), len(hdr))
	return tx.w.Flush()
}

// sendSetupTerminate reports a failed MPA exchange to the peer (initiator
// only): a Terminate on the new stream, without CRC (siw sends these before
// CRC is enabled, so does this side).
func sendSetupTerminate(c net.Conn, err error) {
	t := rdmap.NewTerminate(err)
	c.SetWriteDeadline(time.Now().Add(terminateTimeout))
	w := mpa.NewWriter(c, mpa.WriterConfig{})
	if w.Begin(rdmap.AppendTerminate(nil, &t)) == nil && w.End() == nil {
		w.Flush()
	}
}

// beginSetup moves an idle queue pair into setup; cancel, if set, cuts
// the setup short (Close).
func (qp *QP) beginSetup(cancel context.CancelFunc) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != stateIdle {
		return fmt.Errorf("%w: connect on a %s queue pair", ErrQPState, qp.state)
	}
	qp.setState(stateConnecting, nil)
	qp.setupStart = time.Now()
	qp.setupCancel = cancel
	qp.setupPhase = setupWaiting
	return nil
}

// setSetupConn records the connection setup runs on, so that Close can cut
// it; false if Close came first.
func (qp *QP) setSetupConn(c net.Conn) bool {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	qp.setupConn = c
	return !qp.closeReq
}

// setupFailed ends a queue pair whose connection setup failed, and returns
// the error its caller reports: err, or ErrQPClosed (with err's reason)
// when Close cut the setup short.
func (qp *QP) setupFailed(err error) error {
	qp.mu.Lock()
	if qp.state != stateConnecting {
		qp.mu.Unlock()
		return err
	}
	cause := err
	if qp.closeReq {
		cause = ErrQPClosed
		if err != ErrQPClosed {
			err = fmt.Errorf("%w (setup cut short: %v)", ErrQPClosed, err)
		}
	}
	qp.setupConn, qp.setupCancel = nil, nil
	qp.pd.dev.failedQP(qp)
	qp.setState(stateError, cause)
	qp.flushInErrorLocked(cause)
	qp.setState(stateClosed, cause)
	qp.mu.Unlock()
	qp.deliver()
	return err
}

// tapped wraps c in the configured tap. Socket options and the MSS are read
// from the TCP connection underneath, so tuning happens before. A tap sits
// above TLS: it records the plaintext iWARP stream, which is what the
// dissectors read.
func tapped(c net.Conn, cfg *config) net.Conn {
	if cfg.tap == nil {
		return c
	}
	return &tapConn{Conn: cfg.tap.Wrap(c), raw: c}
}

// tapConn keeps the raw connection for socket-level queries (MSS, linger).
type tapConn struct {
	net.Conn
	raw net.Conn
}

// rawConn returns the connection underneath any tap and TLS stream: the
// TCP connection, for socket options.
func rawConn(c net.Conn) net.Conn {
	if t, ok := c.(*tapConn); ok {
		c = t.raw
	}
	if t, ok := c.(*tlsConn); ok {
		c = t.raw
	}
	return c
}

// setupElapsed is how long setup has run, for "not within" messages.
func (qp *QP) setupElapsed() time.Duration {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	return time.Since(qp.setupStart).Round(100 * time.Millisecond)
}
