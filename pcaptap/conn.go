package pcaptap

import (
	"net"
	"net/netip"
	"sync"

	"github.com/iwarp-go/iwarp-go/internal/capture"
)

// tapConn records what passes through a connection.
//
// Reads and Writes are each serialised by their own mutex, held across the
// I/O and its recording: two concurrent Writes could otherwise be recorded
// in the opposite order to the one the socket sent them in, which would
// corrupt the recorded stream. The socket serialises Writes (and Reads)
// anyway, so the locks cost no parallelism between the two directions.
type tapConn struct {
	net.Conn
	t             *Tap
	local, remote netip.AddrPort

	rmu, wmu sync.Mutex

	mu       sync.Mutex // guards the fields below
	flow     *capture.Flow
	sent     capture.Dir // direction of the bytes this side writes
	finished bool
}

func (c *tapConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.start(false)
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.segments(1-c.sent, p[:n])
	}
	return n, err
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.start(true)
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.segments(c.sent, p[:n])
	}
	return n, err
}

// Close closes the connection, then records the FIN exchange once any
// Read or Write in progress has returned and been recorded.
func (c *tapConn) Close() error {
	err := c.Conn.Close()
	c.rmu.Lock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer c.rmu.Unlock()
	c.start(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return err
	}
	c.finished = true
	if c.flow != nil {
		c.t.record(func() error {
			if err := c.flow.Close(); err != nil {
				return err
			}
			return c.t.flushLocked()
		})
	}
	return err
}

// start records the handshake on first use. The side whose first call is a
// Write is the client: an MPA initiator sends its Request before reading,
// a responder waits for it.
func (c *tapConn) start(writing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flow != nil || c.finished {
		return
	}
	cfg := capture.FlowConfig{Client: c.local, Server: c.remote}
	c.sent = capture.Up
	if !writing {
		cfg.Client, cfg.Server = c.remote, c.local
		c.sent = capture.Down
	}
	c.t.record(func() error {
		f, err := c.t.cw.Open(cfg)
		if err != nil {
			return err
		}
		c.flow = f
		return nil
	})
}

// segments records b as TCP segments of at most MaxSegment bytes.
func (c *tapConn) segments(d capture.Dir, b []byte) {
	c.mu.Lock()
	f := c.flow
	c.mu.Unlock()
	if f == nil {
		return
	}
	c.t.record(func() error {
		for len(b) > 0 {
			n := min(len(b), MaxSegment)
			if err := f.Segment(d, b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	})
}
