package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
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
	if err := qp.beginSetup(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	var d net.Dialer
	d.KeepAlive = cfg.keepAlive
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		err = fmt.Errorf("iwarp: connect %s: %w", addr, err)
		qp.setupFailed(err)
		return err
	}
	return qp.client(ctx, c, &cfg)
}

// Client runs connection setup as the MPA initiator over an established
// connection c (any net.Conn: a TCP connection, a TLS connection, one end
// of net.Pipe). The queue pair owns c from then on.
func (qp *QP) Client(ctx context.Context, c net.Conn, opts ...Option) error {
	cfg, err := buildConfig(defaultConfig(), opts)
	if err != nil {
		return err
	}
	if err := qp.beginSetup(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.setupTimeout)
	defer cancel()
	return qp.client(ctx, c, &cfg)
}

func (qp *QP) client(ctx context.Context, c net.Conn, cfg *config) error {
	if err := tuneSocket(c, cfg); err != nil {
		c.Close()
		qp.setupFailed(err)
		return err
	}
	c = tapped(c, cfg)
	qp.mu.Lock()
	qp.setupConn = c
	qp.mu.Unlock()
	pd := cfg.privateData
	if !cfg.noTrailer {
		if !cfg.mpa.PeerIsIwarpGo && len(pd)+peerTrailerLen > mpa.SiwMaxPrivateData {
			err := fmt.Errorf("iwarp: connection setup: %w: %d bytes of private data, and iwarp-go's %d-byte peer trailer, exceed the %d bytes a peer that may be siw takes (at most %d with the trailer; WithoutPeerTrailer drops it)",
				mpa.ErrSiwLimit, len(pd), peerTrailerLen, mpa.SiwMaxPrivateData, mpa.SiwMaxPrivateData-peerTrailerLen)
			c.Close()
			qp.setupFailed(err)
			return err
		}
		pd = appendPeerTrailer(pd)
	}
	res, err := mpa.Connect(ctx, c, &cfg.mpa, pd)
	if err != nil {
		var me *mpa.Error
		if errors.As(err, &me) && me.Code != 0 {
			// RFC 6581: the initiator reports a bad Reply with a Terminate.
			sendSetupTerminate(c, me)
		}
		c.Close()
		err = fmt.Errorf("iwarp: connection setup: %w", err)
		qp.setupFailed(err)
		return err
	}
	app, isGo := splitPeerTrailer(res.PeerPrivateData)
	res.PeerPrivateData = app
	e := newEngine(qp, c, res, cfg, isGo)
	delay := cfg.firstFPDUDelay
	if delay < 0 {
		delay = DefaultFirstFPDUDelay
		if isGo {
			delay = 0
		}
	}
	if res.SendRTR {
		// The RTR is the first FPDU, and toward siw it must not race its
		// hook-up either; it is sent whatever ctx says.
		if delay > 0 {
			time.Sleep(delay)
		}
		if err := e.sendRTR(cfg.setupTimeout); err != nil {
			c.Close()
			err = fmt.Errorf("iwarp: sending the RTR: %w", err)
			qp.setupFailed(err)
			return err
		}
		e.txOpen = true
	} else if delay > 0 {
		e.txTimer = time.AfterFunc(delay, e.openTx)
	} else {
		e.txOpen = true
	}
	return qp.established(e)
}

// established makes e the queue pair's running connection.
func (qp *QP) established(e *engine) error {
	qp.mu.Lock()
	qp.eng = e
	qp.setupConn = nil
	closing := qp.closeReq
	qp.state = stateRTS
	qp.mu.Unlock()
	e.start()
	qp.kick()
	if closing {
		go qp.Close()
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
	switch e.res.RTR {
	case mpa.RTRRead:
		e.orq[0] = orqEntry{rtr: true, sinkSTag: 1}
		e.orqTail = 1
		hdr = rdmap.AppendReadRequest(e.hdr[:0], e.rreqMSN, rdmap.ReadRequestFields{SinkSTag: 1, SrcSTag: 1})
		e.rreqMSN++
	case mpa.RTRSend:
		hdr = rdmap.AppendSend(e.hdr[:0], rdmap.OpSend, true, 0, e.sendMSN, 0)
		e.sendMSN++
	default:
		hdr = rdmap.AppendWrite(e.hdr[:0], true, 1, 0)
	}
	if err := e.w.Begin(hdr); err != nil {
		return err
	}
	if err := e.w.End(); err != nil {
		return err
	}
	return e.w.Flush()
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

func (qp *QP) beginSetup() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.state != stateIdle {
		return fmt.Errorf("%w: connect on a %s queue pair", ErrQPState, qp.state)
	}
	qp.state = stateConnecting
	return nil
}

// setupFailed ends a queue pair whose connection setup failed.
func (qp *QP) setupFailed(err error) {
	qp.mu.Lock()
	if qp.state != stateConnecting {
		qp.mu.Unlock()
		return
	}
	qp.state = stateError
	qp.err = err
	qp.setupConn = nil
	close(qp.done)
	qp.flushLocked(err)
	qp.mu.Unlock()
	qp.deliver()
	close(qp.finished)
}

// tapped wraps c in the configured tap. Socket options and the MSS are read
// from the TCP connection underneath, so tuning happens before.
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

// rawConn returns the connection underneath any tap.
func rawConn(c net.Conn) net.Conn {
	if t, ok := c.(*tapConn); ok {
		return t.raw
	}
	return c
}
