package iwtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// Port is iwtest's default port.
const Port = 7175

// Provoke selects a bad RDMA Write sink to advertise (PROTOCOL.md §7).
type Provoke uint8

const (
	// ProvokeAccess advertises an STag without remote write access.
	ProvokeAccess Provoke = 1 + iota
	// ProvokeBounds advertises an address past the end of the region.
	ProvokeBounds
)

func (p Provoke) String() string {
	switch p {
	case ProvokeAccess:
		return "access"
	case ProvokeBounds:
		return "bounds"
	}
	return "none"
}

// Directions of data flow a client runs, as a set.
const (
	C2S  = 1 << 0 // the client is the data source
	S2C  = 1 << 1 // the server is
	Both = C2S | S2C
)

// Config is one iwtest run: the C program's command line
// (interop/siw/cprog/iwtest.c) and where its output goes.
type Config struct {
	// Addr is the address a server listens on ("" for every address) or
	// the server a client connects to; Port its port (a server's 0 picks
	// a free one).
	Addr string
	Port int
	// Tests (client; default all) and Sizes: the client runs every test
	// at every size; a server takes messages up to its largest size
	// (default MaxSize).
	Tests []Test
	Sizes []uint32
	// Iters is the number of iterations per test, size and direction;
	// Dirs the directions (C2S, S2C or Both); SGEs the pieces of the
	// multi-SGE tests (1 to MaxSGE).
	Iters int
	Dirs  int
	SGEs  int
	// Timeout limits every wait; Wait a server's wait for a connection.
	Timeout, Wait time.Duration
	// IRD and ORD are advertised; PeerIRD is what the peer is assumed to
	// take where no IRD/ORD is exchanged. Each a power of two, 1 to 128.
	IRD, ORD, PeerIRD int
	// PrivateData goes with the connect, accept or reject (at most
	// MaxPData bytes).
	PrivateData string
	// Reject: a server rejects the connection. ExpectReject: a client
	// succeeds only if it is rejected. ExpectError: succeed only if an
	// operation fails or the connection is lost.
	Reject, ExpectReject, ExpectError bool
	// Provoke, if set, advertises a bad Write sink; the run succeeds only
	// if the peer's Write ends the connection.
	Provoke Provoke
	// Verbose traces every control message on Err.
	Verbose bool
	// Rev, if not 0, is the only MPA revision a server accepts.
	Rev int
	// Options are connection options applied after iwtest's own (IRD,
	// ORD and peer IRD as configured, private data exactly as given).
	// Without them the library's defaults hold: CRC preferred, a Write
	// RTR offered by an initiator and accepted by a responder.
	Options []conn.Option
	// Out and Err are iwtest's stdout (the lines of PROTOCOL.md §8) and
	// stderr (diagnostics).
	Out, Err io.Writer
	// Ready, if not nil, is told a server's listening address.
	Ready func(net.Addr)
	// Listening, if not nil, is given a server's listener once it listens:
	// a metrics endpoint reports what the listener turns away.
	Listening func(*conn.Listener)
}

// ErrFailed: the run did not have the outcome asked for; the output says
// why.
var ErrFailed = errors.New("the test run failed (see the RESULT, SUMMARY and diagnostic lines)")

// Check applies iwtest's limits to a client's (server false) or a
// server's configuration.
func (c *Config) Check(server bool) error {
	switch {
	case c.Port < 0 || c.Port > 65535 || (c.Port == 0 && !server):
		return fmt.Errorf("bad port %d", c.Port)
	case c.Iters < 1:
		return fmt.Errorf("bad iteration count %d", c.Iters)
	case c.Dirs&^Both != 0 || c.Dirs == 0:
		return fmt.Errorf("bad directions %d", c.Dirs)
	case c.Timeout <= 0 || c.Wait <= 0:
		return errors.New("timeouts must be positive")
	case c.SGEs < 1 || c.SGEs > MaxSGE:
		return fmt.Errorf("--sges %d: want 1 to %d", c.SGEs, MaxSGE)
	case len(c.PrivateData) > MaxPData:
		return fmt.Errorf("private data of %d bytes (at most %d)", len(c.PrivateData), MaxPData)
	case !server && c.Addr == "":
		return errors.New("the client needs -a")
	}
	for _, s := range c.Sizes {
		if s < 1 || s > MaxSize {
			return fmt.Errorf("bad size %d (1..16m)", s)
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"--ird", c.IRD}, {"--ord", c.ORD}, {"--peer-ird", c.PeerIRD}} {
		if v.n < 1 || v.n > mpa.MaxAdvertisedIRDORD || v.n&(v.n-1) != 0 {
			return fmt.Errorf("%s %d: want a power of two from 1 to %d", v.name, v.n, mpa.MaxAdvertisedIRDORD)
		}
	}
	return nil
}

// session is a run's configuration with its defaults filled in.
type session struct {
	*Config
	server  bool
	maxsize uint32 // the largest message of the session
}

func newSession(cfg *Config, server bool) *session {
	s := &session{Config: cfg, server: server}
	tests, sizes := cfg.Tests, cfg.Sizes
	if len(tests) == 0 {
		tests = AllTests()
	}
	if len(sizes) == 0 {
		if server {
			sizes = []uint32{MaxSize}
		} else {
			sizes = []uint32{1, 4096, 65536}
		}
	}
	c := *cfg
	c.Tests, c.Sizes = tests, sizes
	s.Config = &c
	for _, n := range sizes {
		s.maxsize = max(s.maxsize, n)
	}
	if cfg.Provoke != 0 {
		s.maxsize = max(s.maxsize, 2)
	}
	return s
}

// options are the connection options, without private data.
func (s *session) options() []conn.Option {
	opts := []conn.Option{conn.WithIRDORD(s.IRD, s.ORD), conn.WithPeerIRD(s.PeerIRD), conn.WithoutPeerTrailer()}
	return append(opts, s.Options...)
}

func (s *session) role() string {
	if s.server {
		return "server"
	}
	return "client"
}
