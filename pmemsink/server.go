package pmemsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Off and Len are the window of the sink the server exposes (Len 0:
	// to the end of the sink).
	Off, Len uint64
	// ReadOnly exposes the region for RDMA Reads only: a peer's Write,
	// Flush Request or GPSPM request ends its connection.
	ReadOnly bool
	// DataOffset is the data_offset of the librpma descriptor blob: where
	// librpma's example clients put their data. 8-aligned, with
	// rpma.ExampleDataLen bytes of the region after it.
	DataOffset uint16
	// Receives is how many GPSPM requests a connection may have
	// outstanding: the receives of rpma.MessageSizeMax bytes posted
	// before the Reply (default 8).
	Receives int
	// Options are added to the listener's for every connection.
	Options []conn.Option
	// Device holds each connection's protection domain (nil: the default
	// device).
	Device *conn.Device
	// Accepted is told of each connection once it is established, Closed
	// once it has ended and its registration is closed. They run on the
	// connection's goroutines and should return quickly.
	Accepted, Closed func(*ServerConn)
	// Failed, if set, is told of connection requests Serve could not
	// serve (the setup failed).
	Failed func(remote net.Addr, err error)

	obs observer // tests: the crash simulator's recorder
}

// Server serves a sink to iWARP connections the way librpma's example
// servers serve their memory, and to iwarp-go initiators with the Flush
// extension. Each connection gets:
//
//   - its own protection domain and registration of the region
//     (Sink.Register), so that its STag is valid on that connection only
//     (RFC 5042), with read-after-write and Flush Requests answered after
//     the persist;
//   - Receives posted receives, before the MPA Reply, for GPSPM flush
//     requests (librpma's example 09 sends its 27-byte request right after
//     its Write), each answered with the 9-byte response after the persist;
//   - librpma's 28-byte descriptor blob (Registration.CommonData) in the
//     Reply's private data.
type Server struct {
	s     *Sink
	cfg   ServerConfig
	win   Range
	nrecv int

	mu      sync.Mutex
	closed  bool
	conns   map[*ServerConn]struct{}
	nextID  int
	setups  sync.WaitGroup
	stopped chan struct{}
}

// ErrServerClosed is returned by Accept and Serve after Shutdown.
var ErrServerClosed = errors.New("pmemsink: server shut down")

// NewServer returns a server of s.
func NewServer(s *Sink, cfg ServerConfig) (*Server, error) {
	size := uint64(s.Size())
	n := cfg.Len
	if n == 0 && cfg.Off < size {
		n = size - cfg.Off
	}
	if err := s.checkRange(cfg.Off, n); err != nil || n == 0 {
		return nil, fmt.Errorf("pmemsink: server: window [%d, +%d) of a %d-byte sink", cfg.Off, n, size)
	}
	// The blob must be valid for every connection: check it once.
	if _, err := rpma.SinkCommonData(0, n, 0, cfg.DataOffset, false); err != nil {
		return nil, fmt.Errorf("pmemsink: server: %w", err)
	}
	srv := &Server{s: s, cfg: cfg, win: Range{Off: cfg.Off, Len: n}, nrecv: cfg.Receives,
		conns: make(map[*ServerConn]struct{}), stopped: make(chan struct{})}
	if srv.nrecv <= 0 {
		srv.nrecv = 8
	}
	return srv, nil
}

// Sink returns the sink served.
func (srv *Server) Sink() *Sink { return srv.s }

// Serve accepts the connection requests of ln until ctx ends, ln is closed
// or Shutdown is called (it then returns nil). Setup failures of single
// connections are not errors of Serve; ServerConfig.Failed is told of
// them.
func (srv *Server) Serve(ctx context.Context, ln *conn.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-srv.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, conn.ErrListenerClosed) {
				return nil
			}
			return err
		}
		srv.mu.Lock()
		if srv.closed {
			srv.mu.Unlock()
			_ = req.Reject(ctx, nil)
			return nil
		}
		srv.setups.Add(1)
		srv.mu.Unlock()
		go func() {
			defer srv.setups.Done()
			if _, err := srv.accept(ctx, req); err != nil && srv.cfg.Failed != nil {
				srv.cfg.Failed(req.RemoteAddr(), err)
			}
		}()
	}
}

// Accept serves the connection request req.
func (srv *Server) Accept(ctx context.Context, req *conn.ConnRequest) (*ServerConn, error) {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		_ = req.Reject(ctx, nil)
		return nil, ErrServerClosed
	}
	srv.setups.Add(1)
	srv.mu.Unlock()
	defer srv.setups.Done()
	return srv.accept(ctx, req)
}

// Message buffers of a connection: the receives for GPSPM requests, then
// one slot per response being sent.
const (
	sendSlot = 16 // > rpma.FlushResponseLen
	sendBase = 1 << 32
)

func (srv *Server) accept(ctx context.Context, req *conn.ConnRequest) (c *ServerConn, err error) {
	srv.mu.Lock()
	srv.nextID++
	c = &ServerConn{srv: srv, id: srv.nextID, remote: req.RemoteAddr(), ended: make(chan struct{})}
	srv.mu.Unlock()
	c.respond = c.respondGPSPM
	nsend := srv.nrecv + 2
	c.free = make(chan int, nsend)
	for i := range nsend {
		c.free <- i
	}
	c.sges = make([]conn.SGE, nsend+srv.nrecv)

	if d := srv.cfg.Device; d != nil {
		c.pd = d.NewPD()
	} else {
		c.pd = conn.NewPD()
	}
	access := conn.RemoteRead
	if !srv.cfg.ReadOnly {
		// Atomics (RFC 7306, iwarp-go initiators only) write too.
		access |= conn.RemoteWrite | conn.RemoteAtomic
	}
	opts := []RegisterOption{OnStop(c.stop)}
	if srv.cfg.obs != nil {
		opts = append(opts, withObserver(srv.cfg.obs, c.id-1))
	}
	c.reg, err = srv.s.Register(c.pd, srv.win.Off, srv.win.Len, access, opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.teardown()
			srv.mu.Lock()
			delete(srv.conns, c)
			srv.mu.Unlock()
			c.errMu.Lock()
			c.err = err
			c.errMu.Unlock()
			close(c.ended) // Done of a listed connection ends either way
		}
	}()
	c.msgs, err = c.pd.Register(make([]byte, srv.nrecv*rpma.MessageSizeMax+nsend*sendSlot), conn.LocalWrite)
	if err != nil {
		return nil, err
	}
	cq := conn.NewCQ(srv.nrecv+nsend, conn.WithCompletionHandler(c.handle))
	c.qp, err = c.pd.NewQP(cq, conn.QPCaps{SendDepth: nsend, RecvDepth: srv.nrecv, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return nil, err
	}
	// librpma's GPSPM client sends its request right after its Write:
	// the receives must be there before the Reply.
	for i := range srv.nrecv {
		if err = c.postRecv(i); err != nil {
			return nil, err
		}
	}
	cd, err := c.reg.CommonData(srv.cfg.DataOffset)
	if err != nil {
		return nil, err
	}
	aopts := append(append([]conn.Option(nil), srv.cfg.Options...), conn.WithPrivateData(cd.Append(nil)))
	// The connection is listed before Accept: the queue pair serves the
	// initiator as soon as it is in RTS, which is before Accept returns,
	// and a connection that has served a flush must be in Conns.
	// Shutdown waits for setups before it reads the list.
	srv.mu.Lock()
	srv.conns[c] = struct{}{}
	srv.mu.Unlock()
	if err = req.Accept(ctx, c.qp, aopts...); err != nil {
		return nil, err
	}
	if srv.cfg.Accepted != nil {
		srv.cfg.Accepted(c)
	}
	go c.watch()
	return c, nil
}

// Shutdown stops accepting connections and ends every connection once the
// persists it asked for are done and their acknowledgements sent: it
// waits for each connection's queued flushes, then closes it gracefully
// (posted responses go out, then FIN). When ctx ends first, the remaining
// connections are aborted. The sink stays open: Close it afterwards, which
// persists the whole region.
func (srv *Server) Shutdown(ctx context.Context) error {
	srv.mu.Lock()
	if !srv.closed {
		srv.closed = true
		close(srv.stopped)
	}
	srv.mu.Unlock()
	srv.setups.Wait()
	srv.mu.Lock()
	conns := make([]*ServerConn, 0, len(srv.conns))
	for c := range srv.conns {
		conns = append(conns, c)
	}
	srv.mu.Unlock()
	for _, c := range conns {
		go func() {
			c.reg.g.drain()
			_ = c.qp.Close()
		}()
	}
	var err error
	for _, c := range conns {
		select {
		case <-c.ended:
		case <-ctx.Done():
			err = fmt.Errorf("pmemsink: server shutdown: %w", context.Cause(ctx))
			_ = c.qp.Abort()
			<-c.ended
		}
	}
	return err
}

// Conns returns the connections being served.
func (srv *Server) Conns() []*ServerConn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	out := make([]*ServerConn, 0, len(srv.conns))
	for c := range srv.conns {
		out = append(out, c)
	}
	return out
}

// ServerConn is one connection a Server serves.
type ServerConn struct {
	srv    *Server
	id     int
	remote net.Addr
	pd     *conn.PD
	qp     *conn.QP
	reg    *Registration
	msgs   *conn.MR
	free   chan int // send slots
	sges   []conn.SGE
	// respond is respondGPSPM, bound once so that handing it to GPSPM
	// does not allocate.
	respond GPSPMResponder
	gpspm   atomic.Uint64

	errMu sync.Mutex
	err   error
	ended chan struct{}
}

// ConnStats counts what a connection did with the region.
type ConnStats struct {
	// Writes and BytesWritten count the RDMA Write placements.
	Writes, BytesWritten uint64
	// Persists counts the persists run for the connection's flushes (a
	// flush with nothing dirty needs none), BytesPersisted their ranges.
	Persists, BytesPersisted uint64
	// GPSPM counts the GPSPM requests answered.
	GPSPM uint64
}

// ID numbers the server's connections from 1.
func (c *ServerConn) ID() int { return c.id }

// RemoteAddr returns the initiator's address.
func (c *ServerConn) RemoteAddr() net.Addr { return c.remote }

// QP returns the connection's queue pair.
func (c *ServerConn) QP() *conn.QP { return c.qp }

// Registration returns the connection's registration of the region.
func (c *ServerConn) Registration() *Registration { return c.reg }

// Stats returns the connection's counters.
func (c *ServerConn) Stats() ConnStats {
	st := c.reg.Stats()
	return ConnStats{Writes: st.Writes, BytesWritten: st.BytesPlaced, Persists: st.Persists,
		BytesPersisted: st.BytesPersisted, GPSPM: c.gpspm.Load()}
}

// Err returns why the connection ended: the sink's own reason (a GPSPM
// request that does not parse or lies outside the region, a persist that
// failed) or the queue pair's (conn.QP.Err: the peer closed, a Terminate,
// a memory fault). nil while it runs.
func (c *ServerConn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Done is closed once the connection has ended and its registration is
// closed.
func (c *ServerConn) Done() <-chan struct{} { return c.ended }

func (c *ServerConn) postRecv(slot int) error {
	c.sges[slot] = c.msgs.SGE(slot*rpma.MessageSizeMax, rpma.MessageSizeMax)
	return c.qp.PostRecv(conn.RecvWR{ID: uint64(slot), SGL: c.sges[slot : slot+1]})
}

func (c *ServerConn) sendOff(slot int) int { return c.srv.nrecv*rpma.MessageSizeMax + slot*sendSlot }

// handle is the connection's completion handler: a received Send is a
// GPSPM request; a completed Send frees its buffer.
func (c *ServerConn) handle(wc *conn.WorkCompletion) {
	if wc.Status != conn.WCSuccess {
		return // the connection is ending; watch cleans up
	}
	switch wc.Op {
	case conn.WCRecv:
		slot := int(wc.ID)
		off := slot * rpma.MessageSizeMax
		msg := c.msgs.Bytes()[off : off+int(wc.ByteLen)]
		if err := c.reg.GPSPM(msg, c.respond); err != nil {
			c.fail(fmt.Errorf("GPSPM request from %v: %w", c.remote, err))
			return
		}
		if err := c.postRecv(slot); err != nil {
			c.fail(err)
		}
	case conn.WCSend:
		c.free <- int(wc.ID - sendBase)
	}
}

// respondGPSPM sends a GPSPM response once the persist is done; a failed
// persist ends the connection instead.
func (c *ServerConn) respondGPSPM(resp rpma.FlushResponse, err error) {
	if err != nil {
		c.fail(fmt.Errorf("GPSPM flush: %w", err))
		return
	}
	var slot int
	select {
	case slot = <-c.free:
	case <-c.qp.Done():
		return
	}
	off := c.sendOff(slot)
	b := c.msgs.Bytes()[off : off : off+sendSlot]
	n := len(resp.Append(b))
	i := c.srv.nrecv + slot
	c.sges[i] = c.msgs.SGE(off, n)
	err = c.qp.PostSend(conn.SendWR{ID: sendBase + uint64(slot), Op: conn.OpSend, Flags: conn.Signaled, SGL: c.sges[i : i+1]})
	if err != nil {
		c.free <- slot
		c.fail(err)
		return
	}
	c.gpspm.Add(1)
}

// fail records why the sink ends the connection and starts closing it.
func (c *ServerConn) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
	go c.qp.Close()
}

// stop is the registration's OnStop: the sink is closing.
func (c *ServerConn) stop() { go c.qp.Abort() }

// watch cleans up once the queue pair has ended.
func (c *ServerConn) watch() {
	<-c.qp.Done()
	c.errMu.Lock()
	if c.err == nil {
		c.err = c.qp.Err()
	}
	c.errMu.Unlock()
	c.teardown()
	c.srv.mu.Lock()
	delete(c.srv.conns, c)
	c.srv.mu.Unlock()
	if f := c.srv.cfg.Closed; f != nil {
		f(c)
	}
	close(c.ended)
}

func (c *ServerConn) teardown() {
	if c.qp != nil {
		_ = c.qp.Close()
	}
	_ = c.reg.Close()
	if c.msgs != nil {
		_ = c.msgs.Deregister()
	}
}
