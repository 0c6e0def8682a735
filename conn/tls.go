package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
)

// Errors of connection setup inside TLS.
var (
	// ErrTLSHandshake wraps every failed or unfinished TLS handshake (the
	// crypto/tls error, or the setup context's, is wrapped beside it).
	ErrTLSHandshake = errors.New("iwarp: TLS handshake failed")
	// ErrTLSRequired is what an initiator without TLS sees when it meets
	// a listener that requires TLS: the listener answers the plain MPA
	// Request with a reject whose private data says so.
	ErrTLSRequired = errors.New("iwarp: the listener requires TLS (WithTLS)")
)

// tlsRequiredPD is the private data of the reject a TLS listener sends to
// a plain MPA Request: readable by people in any capture or log, and what
// an iwarp-go initiator recognises to report ErrTLSRequired.
var tlsRequiredPD = []byte("iwarp-go: TLS required")

// tlsALPN is the application protocol both ends offer when the
// configuration names none, so that a TLS service of another kind fails
// the handshake instead of reading an MPA Request as its own protocol.
const tlsALPN = "iwarp"

// WithTLS runs the connection inside TLS (crypto/tls): the TLS handshake
// is the first step of connection setup, right after the TCP connect, and
// MPA, DDP and RDMAP run unchanged inside the TLS stream. Give it to
// Connect, Dial or Client (cfg is a client configuration: its ServerName,
// when empty, is taken from the address dialled) and to Listen,
// NewListener or Server (a server configuration; ClientAuth set to
// tls.RequireAndVerifyClientCert makes authentication mutual). Accept
// takes no WithTLS: the listener has done the handshake before the request
// is read. When cfg names no NextProtos, both ends offer "iwarp".
//
// This is for iwarp-go peers only: Linux siw and RDMA NICs speak iWARP
// over bare TCP. It exists because RFC 5042 §5 leaves protection against
// eavesdropping and tampering to IPsec, which few deployments run, while
// every Go service has crypto/tls. The handshake counts against the setup
// timeout and context; on a listener, against WithMaxHandshakes, and a
// failed one is counted in ListenerStats.TLSFailed. A TLS initiator that
// meets a listener without TLS fails with ErrTLSHandshake; an initiator
// without TLS that meets a TLS listener fails with ErrTLSRequired.
//
// The MPA CRC stays negotiated as without TLS (CRCPreferred by default,
// RFC 5044 §4.4: "The default configuration for a connection MUST be to use
// CRCs"). Inside TLS it is redundant, since TLS authenticates every byte,
// so WithCRC(CRCOff) on both ends is a sound choice that saves the CRC32c
// pass over every byte. QP.TLSState and ConnRequest.TLSState show the
// negotiated TLS connection and the peer's certificates.
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(c *config) error {
		if cfg == nil {
			return badOption("nil TLS configuration")
		}
		c.tls = cfg
		return nil
	})
}

// tlsConn is an established TLS stream over the TCP connection raw.
//
// Close closes the TCP connection without a close_notify alert. iWARP ends
// a stream with TCP's FIN (MPA and RDMAP have no closing message), so the
// alert adds nothing a peer acts on, and crypto/tls sends it with a write
// that waits up to five seconds for a peer that stops reading, which
// would break Close's and Abort's bounds. A forged FIN at an FPDU boundary
// ends the connection as a forged reset would, which TCP without IPsec
// cannot prevent anyway; it cannot make a message appear complete.
//
// Writes go through wb, a write-behind layer beneath crypto/tls (nil for a
// *tls.Conn the application made, whose writes block as crypto/tls's do).
// Write blocks until the socket has taken everything, unless the transmit
// token holder cleared block for a write that must not wait (tryFlush).
type tlsConn struct {
	*tls.Conn
	raw   net.Conn     // the TCP connection beneath
	wb    *writeBehind // between crypto/tls and raw, or nil
	stage []byte       // WriteBuffers' record-sized staging, made at first use
	block bool         // Write waits for the socket (owned by the transmit token)
}

func newTLSConn(tc *tls.Conn, raw net.Conn, wb *writeBehind) *tlsConn {
	if wb != nil {
		wb.enable()
	}
	return &tlsConn{Conn: tc, raw: raw, wb: wb, block: true}
}

// Write seals p into records. With block set it hands crypto/tls at most
// wbChunk at a time, each after the backlog has room for it, and returns
// once the socket has taken everything: the transmitter's and setup's
// writes. With block cleared nothing waits for the socket.
func (t *tlsConn) Write(p []byte) (int, error) {
	if t.wb == nil || !t.block {
		return t.Conn.Write(p)
	}
	n := 0
	for len(p) > 0 {
		if err := t.wb.drainTo(wbMax - 2*wbChunk); err != nil {
			return n, err
		}
		k := min(len(p), wbChunk)
		m, err := t.Conn.Write(p[:k])
		if n += m; err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, t.wb.drainTo(0)
}

// tryFlush is Flush for a caller that must not block (a posting goroutine,
// the receive token holder): it seals and hands on the queued FPDUs when
// the backlog is empty and the batch is short, and reports false, having
// written nothing, otherwise. Called with the transmit token held.
func (t *tlsConn) tryFlush(w *mpa.Writer) (bool, error) {
	if t.wb == nil || w.Buffered() > wbChunk || t.wb.pending() > 0 {
		return false, nil
	}
	t.block = false
	err := w.Flush()
	t.block = true
	return err == nil, err
}

// Close closes the TCP connection; see tlsConn.
func (t *tlsConn) Close() error { return t.raw.Close() }

// errTLSCut is what a read reports when the peer's stream ends inside a
// TLS record: a torn stream, said in words that name TLS.
var errTLSCut = fmt.Errorf("the peer's TLS stream ended inside a record: %w", io.ErrUnexpectedEOF)

// Read is tls.Conn.Read, with a stream cut inside a record reported as
// errTLSCut.
func (t *tlsConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if err == io.ErrUnexpectedEOF {
		err = errTLSCut
	}
	return n, err
}

// tlsRecord is the most plaintext a TLS record carries (RFC 8446 §5.1).
const tlsRecord = 16 << 10

// WriteBuffers is mpa.BuffersWriter: it hands crypto/tls full records'
// worth of plaintext rather than each FPDU piece apart (a header, a
// payload, a CRC), each of which would otherwise become a record of its
// own with its own seal, tag and system call.
func (t *tlsConn) WriteBuffers(bufs [][]byte) (int64, error) {
	if t.stage == nil {
		t.stage = make([]byte, 0, tlsRecord)
	}
	return writeRecords(t, t.stage, bufs)
}

// writeRecords writes bufs to w in pieces that are whole multiples of a
// record, but for the last: small pieces are copied into stage (its
// capacity a record), long payloads go to w directly in whole records,
// with only their head and tail staged.
func writeRecords(w io.Writer, stage []byte, bufs [][]byte) (int64, error) {
	st := stage[:0]
	var n int64
	for _, p := range bufs {
		if len(st) > 0 || len(p) < cap(st) {
			k := copy(st[len(st):cap(st)], p)
			st, p = st[:len(st)+k], p[k:]
			if len(st) == cap(st) {
				m, err := w.Write(st)
				if n += int64(m); err != nil {
					return n, err
				}
				st = st[:0]
			}
		}
		if len(p) >= cap(st) {
			k := len(p) - len(p)%cap(st)
			m, err := w.Write(p[:k])
			if n += int64(m); err != nil {
				return n, err
			}
			p = p[k:]
		}
		st = append(st, p...) // st is empty here, and p shorter than a record
	}
	if len(st) > 0 {
		m, err := w.Write(st)
		n += int64(m)
		return n, err
	}
	return n, nil
}

// tlsOf returns the TLS stream beneath c (under a tap), or nil.
func tlsOf(c net.Conn) *tlsConn {
	if t, ok := c.(*tapConn); ok {
		c = t.raw
	}
	t, _ := c.(*tlsConn)
	return t
}

// adoptTLS gives a *tls.Conn passed to Client or Server the treatment of
// one made by WithTLS: socket options reach its TCP connection, Close is
// bounded, TLSState shows it.
func adoptTLS(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return newTLSConn(tc, tc.NetConn(), nil)
	}
	return c
}

// TLSState returns the state of the connection's TLS stream (version,
// cipher suite, the peer's certificate chain in PeerCertificates) when it
// runs inside TLS; ok is false before the connection is established and
// for a connection without TLS.
func (qp *QP) TLSState() (state tls.ConnectionState, ok bool) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.eng == nil {
		return tls.ConnectionState{}, false
	}
	if t := tlsOf(qp.eng.c); t != nil {
		return t.ConnectionState(), true
	}
	return tls.ConnectionState{}, false
}

// TLSState returns the state of the request's TLS stream, so that the
// application can look at the initiator's certificate before it accepts;
// ok is false for a request without TLS.
func (r *ConnRequest) TLSState() (state tls.ConnectionState, ok bool) {
	if t := tlsOf(r.c); t != nil {
		return t.ConnectionState(), true
	}
	return tls.ConnectionState{}, false
}

// tlsConfig is cfg ready for one connection: ServerName from host when an
// initiator's is empty, the default ALPN when none is named.
func tlsConfig(cfg *tls.Config, client bool, host string) *tls.Config {
	needName := client && cfg.ServerName == "" && !cfg.InsecureSkipVerify
	if !needName && len(cfg.NextProtos) > 0 {
		return cfg
	}
	cfg = cfg.Clone()
	if needName {
		cfg.ServerName = host
	}
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{tlsALPN}
	}
	return cfg
}

// hostOf is the host part of addr (addr itself when it has no port).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// clientTLS runs the initiator's TLS handshake on the TCP connection c,
// bounded by ctx; on failure c is closed.
func clientTLS(ctx context.Context, c net.Conn, cfg *tls.Config, host string) (*tlsConn, error) {
	wb := newWriteBehind(c, c)
	tc := tls.Client(wb, tlsConfig(cfg, true, host))
	if err := withDeadline(ctx, c, tc.Handshake); err != nil {
		c.Close()
		return nil, handshakeError(ctx, c, err, "is it an iWARP listener without TLS?")
	}
	return newTLSConn(tc, c, wb), nil
}

// serverTLS runs the responder's TLS handshake on the TCP connection c,
// bounded by ctx. An MPA Request where a ClientHello belongs (an
// initiator without TLS) is read and answered with a reject that says TLS
// is required, and reported as ErrTLSRequired. c is left to the caller.
func serverTLS(ctx context.Context, c net.Conn, cfg *config) (*tlsConn, error) {
	var first [1]byte
	err := withDeadline(ctx, c, func() error {
		_, err := io.ReadFull(c, first[:])
		return err
	})
	if err != nil {
		return nil, handshakeError(ctx, c, err, "no ClientHello")
	}
	sc := &sniffConn{Conn: c, head: first[:]}
	if first[0] == mpa.RequestKey[0] {
		// RFC 5044 §7.1.2: a plain initiator, answered in MPA so that it
		// learns why. A Request it cannot read is closed without one.
		req, err := mpa.ReadRequest(ctx, sc, &cfg.mpa)
		if err != nil {
			return nil, fmt.Errorf("%w with %s: neither a ClientHello nor an MPA Request: %w", ErrTLSHandshake, addrString(c.RemoteAddr()), err)
		}
		rerr := req.Reject(ctx, tlsRequiredPD)
		return nil, fmt.Errorf("%w: a plain MPA Request from %s was rejected%s", ErrTLSRequired, addrString(c.RemoteAddr()), errSuffix(rerr))
	}
	wb := newWriteBehind(sc, c)
	tc := tls.Server(wb, tlsConfig(cfg.tls, false, ""))
	if err := withDeadline(ctx, c, tc.Handshake); err != nil {
		return nil, handshakeError(ctx, c, err, "")
	}
	return newTLSConn(tc, c, wb), nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// sniffConn reads back the byte the responder read to tell a ClientHello
// from an MPA Request, then reads from the connection.
type sniffConn struct {
	net.Conn
	head []byte
}

func (s *sniffConn) Read(p []byte) (int, error) {
	if len(s.head) > 0 && len(p) > 0 {
		n := copy(p, s.head)
		s.head = s.head[n:]
		return n, nil
	}
	return s.Conn.Read(p)
}

// handshakeError wraps a failed handshake: ErrTLSHandshake, the peer, the
// context's error when it ended the handshake, and hint when the peer hung
// up (what a listener without TLS does with a ClientHello).
func handshakeError(ctx context.Context, c net.Conn, err error, hint string) error {
	peer := addrString(c.RemoteAddr())
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w with %s: not done within the setup time: %w (%w)", ErrTLSHandshake, peer, cerr, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w with %s: not done within the setup time: %w (%w)", ErrTLSHandshake, peer, context.DeadlineExceeded, err)
	}
	if hint != "" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		return fmt.Errorf("%w with %s: the peer closed the connection (%s): %w", ErrTLSHandshake, peer, hint, err)
	}
	return fmt.Errorf("%w with %s: %w", ErrTLSHandshake, peer, err)
}

// withDeadline runs fn with c's deadline set from ctx, cut short when ctx
// ends, and cleared afterwards.
func withDeadline(ctx context.Context, c net.Conn, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cut)
		c.SetDeadline(pastDeadline)
	})
	err := fn()
	if !stop() {
		<-cut
	}
	c.SetDeadline(time.Time{})
	return err
}

// tlsRejected turns the reject a TLS listener sends a plain Request into
// ErrTLSRequired.
func tlsRejected(err error, peer string) error {
	var re *mpa.RejectedError
	if errors.As(err, &re) && bytes.Equal(re.PrivateData, tlsRequiredPD) {
		return fmt.Errorf("%w: %s: %w", ErrTLSRequired, peer, err)
	}
	return nil
}
