package conn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
)

// CRCMode says how connection setup negotiates the MPA CRC. Whatever the
// mode, the CRC in use is what the responder's Reply says.
type CRCMode = mpa.CRCMode

const (
	// CRCPreferred asks for CRC and accepts a peer that declines (default).
	CRCPreferred = mpa.CRCPreferred
	// CRCRequired fails the connection unless CRC is in use.
	CRCRequired = mpa.CRCRequired
	// CRCOff does not ask for CRC; a responder still follows an initiator
	// that asks.
	CRCOff = mpa.CRCOff
)

// RTR is a set of RFC 6581 ready-to-receive message types.
type RTR = mpa.RTR

const (
	RTRSend  = mpa.RTRSend
	RTRWrite = mpa.RTRWrite
	RTRRead  = mpa.RTRRead
)

// Default values of the connection options.
const (
	DefaultIRD            = 16
	DefaultORD            = 16
	DefaultPeerIRD        = 1
	DefaultSetupTimeout   = 10 * time.Second
	DefaultFirstFPDUDelay = 300 * time.Millisecond
)

// Option configures connection setup (Connect, Dial, Listen, Accept).
// Options validate their arguments; an invalid one makes the call that
// received it fail.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// ErrBadOption wraps every option validation failure.
var ErrBadOption = errors.New("iwarp: invalid option")

func badOption(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadOption, fmt.Sprintf(format, args...))
}

type config struct {
	mpa            mpa.Config
	privateData    []byte
	peerIRD        uint16 // assumed when no IRD/ORD was exchanged
	maxFPDU        int    // 0: from the TCP MSS, or 65535 between iwarp-go peers
	keepAlive      time.Duration
	userTimeout    time.Duration
	setupTimeout   time.Duration
	firstFPDUDelay time.Duration // <0: automatic
	responderFirst time.Duration // >0: a responder may send first after it
	tap            Tap
	tls            *tls.Config // WithTLS
	noTrailer      bool
	logger         *slog.Logger
	idleTimeout    time.Duration

	// Listener limits.
	backlog        int
	maxHandshakes  int
	requestTimeout time.Duration
	maxConns       int
	protFailures   int
	protWindow     time.Duration
}

func defaultConfig() config {
	return config{
		mpa: mpa.Config{
			Revision: 2,
			CRC:      mpa.CRCPreferred,
			IRD:      DefaultIRD,
			ORD:      DefaultORD,
			P2P:      true,
			RTR:      mpa.RTRWrite,
		},
		peerIRD:        DefaultPeerIRD,
		setupTimeout:   DefaultSetupTimeout,
		firstFPDUDelay: -1,
		backlog:        DefaultBacklog,
		maxHandshakes:  DefaultMaxHandshakes,
		requestTimeout: DefaultRequestTimeout,
		protFailures:   DefaultProtectionFailures,
		protWindow:     DefaultProtectionWindow,
	}
}

func buildConfig(base config, opts []Option) (config, error) {
	c := base
	c.privateData = append([]byte(nil), base.privateData...)
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	if err := c.mpa.Validate(); err != nil {
		return config{}, fmt.Errorf("%w: %v", ErrBadOption, err)
	}
	return c, nil
}

// WithCRC sets how the MPA CRC is negotiated (default CRCPreferred).
func WithCRC(mode CRCMode) Option {
	return optionFunc(func(c *config) error {
		switch mode {
		case CRCPreferred, CRCRequired, CRCOff:
			c.mpa.CRC = mode
			return nil
		}
		return badOption("unknown CRC mode %d", mode)
	})
}

// WithMPARevision selects MPA revision 1 (RFC 5044: no IRD/ORD exchange, no
// peer-to-peer mode) or 2 (RFC 6581, the default).
func WithMPARevision(rev int) Option {
	return optionFunc(func(c *config) error {
		switch rev {
		case 1:
			c.mpa.Revision = 1
			c.mpa.P2P = false
		case 2:
			c.mpa.Revision = 2
		default:
			return badOption("MPA revision %d (want 1 or 2)", rev)
		}
		return nil
	})
}

// WithoutEnhanced sends revision 2 frames without the RFC 6581 Enhanced flag:
// no IRD/ORD exchange and no peer-to-peer mode.
func WithoutEnhanced() Option {
	return optionFunc(func(c *config) error {
		c.mpa.NoEnhanced = true
		c.mpa.P2P = false
		return nil
	})
}

// WithMarkers asks the peer to insert MPA markers (RFC 5044 §4.3) into the
// stream it sends. siw refuses markers.
func WithMarkers() Option {
	return optionFunc(func(c *config) error {
		c.mpa.RequestMarkers = true
		return nil
	})
}

// WithIRDORD sets the inbound (IRD) and outbound (ORD) RDMA Read depths this
// side advertises: each a power of two from 1 to 128.
func WithIRDORD(ird, ord int) Option {
	return optionFunc(func(c *config) error {
		for _, v := range []int{ird, ord} {
			if v < 1 || v > mpa.MaxAdvertisedIRDORD || v&(v-1) != 0 {
				return badOption("IRD/ORD %d: must be a power of two from 1 to %d", v, mpa.MaxAdvertisedIRDORD)
			}
		}
		c.mpa.IRD, c.mpa.ORD = uint16(ird), uint16(ord)
		return nil
	})
}

// WithPeerIRD sets the number of RDMA Reads assumed to be acceptable to the
// peer when connection setup exchanged no IRD/ORD (MPA revision 1, or
// revision 2 without the Enhanced flag). Default 1.
func WithPeerIRD(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > mpa.MaxAdvertisedIRDORD {
			return badOption("peer IRD %d: must be from 1 to %d", n, mpa.MaxAdvertisedIRDORD)
		}
		c.peerIRD = uint16(n)
		return nil
	})
}

// WithPrivateData sets the private data carried in the MPA Request (initiator)
// or Reply (responder). An initiator appends iwarp-go's 8-byte peer trailer
// unless WithoutPeerTrailer is given, and a peer that is not iwarp-go sees
// it as part of the private data. Toward a peer that may be siw at most 251
// bytes fit, 243 with the trailer.
func WithPrivateData(b []byte) Option {
	return optionFunc(func(c *config) error {
		if len(b) > mpa.MaxPrivateData {
			return badOption("private data of %d bytes (at most %d)", len(b), mpa.MaxPrivateData)
		}
		c.privateData = append(c.privateData[:0], b...)
		return nil
	})
}

// WithP2P sets the RFC 6581 peer-to-peer ready-to-receive types (default:
// on, Write). An initiator offers them; a responder prefers them: it picks
// Write, then Read, then Send among those offered that it lists, and when
// none fits names one it lists anyway (RFC 6581 §9.2: a responder answers
// every peer-to-peer Request in peer-to-peer mode).
func WithP2P(rtr RTR) Option {
	return optionFunc(func(c *config) error {
		if rtr == 0 || rtr&^(RTRSend|RTRWrite|RTRRead) != 0 {
			return badOption("RTR set %v", rtr)
		}
		c.mpa.P2P = true
		c.mpa.RTR = rtr
		return nil
	})
}

// WithoutP2P turns peer-to-peer mode off for an initiator: its Request
// does not ask for it. A responder still answers a Request that asks for it
// in peer-to-peer mode (RFC 6581 §9.2); otherwise it sends nothing before
// the initiator's first message (RFC 5044 §7.1.2 rule 4).
func WithoutP2P() Option {
	return optionFunc(func(c *config) error {
		c.mpa.P2P = false
		return nil
	})
}

// WithAcceptDowngrade lets an initiator accept a revision 1 Reply (or one
// without the Enhanced flag) to its enhanced Request.
func WithAcceptDowngrade() Option {
	return optionFunc(func(c *config) error {
		c.mpa.AcceptDowngrade = true
		return nil
	})
}

// WithMaxFPDU bounds the size of the FPDUs this side sends (MPA length field
// to CRC, 136 to 64776 bytes: a ULPDU of 128 to 64768, the range RFC 5044
// §3 gives the MULPDU). By default FPDUs fit the TCP maximum segment
// size, or are as large as MPA allows when the peer is iwarp-go.
func WithMaxFPDU(n int) Option {
	return optionFunc(func(c *config) error {
		if n < minFPDU || n > maxFPDU {
			return badOption("max FPDU %d: must be from %d to %d (RFC 5044 §3: a ULPDU of 128 to 64768 octets)", n, minFPDU, maxFPDU)
		}
		c.maxFPDU = n
		return nil
	})
}

// WithTCPKeepAlive sets the TCP keep-alive period (0 keeps the system
// default, negative disables keep-alive).
func WithTCPKeepAlive(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.keepAlive = d
		return nil
	})
}

// WithTCPUserTimeout bounds how long sent data may stay unacknowledged
// before the connection is dropped, so that a peer that vanishes without
// FIN or RST is detected. Zero keeps the system default.
//
// Each system has its own socket option for this: TCP_USER_TIMEOUT on
// Linux, TCP_RXT_CONNDROPTIME on macOS (counted from the first
// retransmission), TCP_MAXUNACKTIME on FreeBSD 14 and later, TCP_MAXRTMS
// (or TCP_MAXRT) on Windows; where the option takes whole seconds the
// timeout is rounded up. Where there is none (FreeBSD 13 and older,
// OpenBSD, NetBSD, ...), setting up a connection with this option fails
// with an error that wraps errors.ErrUnsupported.
func WithTCPUserTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return badOption("TCP user timeout %v", d)
		}
		c.userTimeout = d
		return nil
	})
}

// WithSetupTimeout bounds connection setup (TCP connect and the MPA exchange)
// in addition to the context (default 10 s). A responder drops a connection
// whose MPA Request has not arrived within it.
func WithSetupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return badOption("setup timeout %v", d)
		}
		c.setupTimeout = d
		return nil
	})
}

// WithFirstFPDUDelay sets how long an initiator holds back its first FPDU
// after the MPA Reply. Linux siw hooks its receive path to the connection only
// after it sent the Reply, so an FPDU that arrives in between can sit
// unprocessed; the default is 300 ms toward peers that are not iwarp-go, and
// zero between iwarp-go peers. Posting never blocks on it.
func WithFirstFPDUDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return badOption("first FPDU delay %v", d)
		}
		c.firstFPDUDelay = d
		return nil
	})
}

// WithResponderSendFirst lets a responder send after d without having
// received the initiator's first FPDU. RFC 5044 §7.1.2 rule 4 says a
// responder MUST receive one first, and by default conn keeps it; but an
// initiator that negotiated no peer-to-peer mode and whose application
// expects the responder to speak first (perftest's ib_write_lat client
// toward its server, as siw allows) would otherwise wait for ever. Give it
// on Accept for such a connection only, with d well above the MPA
// exchange (siw fails when FPDUs follow its Reply too closely); it is a
// deliberate deviation, and has no effect when the initiator sends an
// RTR or its own first FPDU sooner.
func WithResponderSendFirst(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return badOption("responder send-first delay %v", d)
		}
		c.responderFirst = d
		return nil
	})
}

// Tap records a connection's traffic. Wrap is given the connection before
// the MPA exchange and returns the connection the queue pair then uses for
// every byte it sends and receives (package pcaptap writes such a capture).
type Tap interface {
	Wrap(c net.Conn) net.Conn
}

// WithTap records the connection through t. A tapped connection writes
// each piece of an FPDU batch separately instead of one writev, so use it
// for debugging and tests, not for measurements.
func WithTap(t Tap) Option {
	return optionFunc(func(c *config) error {
		if t == nil {
			return badOption("nil tap")
		}
		c.tap = t
		return nil
	})
}

// WithoutPeerTrailer sends the initiator's private data exactly as given,
// without the 8-byte trailer by which iwarp-go peers recognise each other
// (and agree on 64 KiB FPDUs and no first-FPDU delay). Use it to be
// byte-for-byte what another implementation sends, e.g. rping's empty
// private data toward siw.
func WithoutPeerTrailer() Option {
	return optionFunc(func(c *config) error {
		c.noTrailer = true
		return nil
	})
}

// WithLogger traces the connection's life through l: setup (what was
// negotiated), every Terminate sent or received, and teardown; on a
// Listener also the connections it turns away (at most a line a second).
// nil, the default, logs nothing.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		c.logger = l
		return nil
	})
}

// WithIdleTimeout closes a connection on which nothing has been sent or
// received for d (RFC 5044 §7.1.2 rule 10: a ULP "SHOULD implement a
// reasonable timeout while waiting for FPDUs"). Zero, the default, never
// does: an RDMA connection may legitimately sit idle for hours.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return badOption("idle timeout %v", d)
		}
		c.idleTimeout = d
		return nil
	})
}

// WithBacklog bounds the connection requests a Listener holds for
// AcceptRequest (default 1024); a request beyond it is closed.
func WithBacklog(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return badOption("backlog %d", n)
		}
		c.backlog = n
		return nil
	})
}

// WithMaxHandshakes bounds the MPA Requests a Listener reads at once
// (default 1024); a TCP connection beyond it is closed at once.
func WithMaxHandshakes(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return badOption("max handshakes %d", n)
		}
		c.maxHandshakes = n
		return nil
	})
}

// WithRequestTimeout bounds how long a connection request waits for
// AcceptRequest (default 10 s); an older one is closed.
func WithRequestTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return badOption("request timeout %v", d)
		}
		c.requestTimeout = d
		return nil
	})
}

// WithMaxConnections bounds the connections a Listener has accepted and
// not yet ended, with the requests it holds (default 0: no bound). A TCP
// connection beyond it is closed at once.
func WithMaxConnections(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return badOption("max connections %d", n)
		}
		c.maxConns = n
		return nil
	})
}

// WithProtectionFailureLimit makes a Listener refuse, for one window,
// connections from an address whose connections ended n times within the
// window because the peer touched memory it may not (this side sent a
// Terminate for a protection check: what guessing STags looks like). The
// default is 16 per minute; n = 0 turns the limit off. It complements, and
// does not replace, a protection domain per untrusted peer (see PD).
func WithProtectionFailureLimit(n int, window time.Duration) Option {
	return optionFunc(func(c *config) error {
		if n < 0 || (n > 0 && window <= 0) {
			return badOption("protection failure limit %d per %v", n, window)
		}
		c.protFailures, c.protWindow = n, window
		return nil
	})
}
