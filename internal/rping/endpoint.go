package rping

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/syncwriter"
	"github.com/iwarp-go/iwarp-go/internal/waiter"
)

// Config is one rping run: rping's command line, and where its output goes.
type Config struct {
	// Addr is the address a server listens on ("" for every address) or
	// the server a client connects to; Port its port (a server's 0 picks
	// a free one).
	Addr string
	Port int
	// Src is the client's source address ("" for any).
	Src string
	// Count is the number of pings (0: until interrupted, or until the
	// server disconnects, which rping counts as success).
	Count int
	// Size is the ping size, MinSize to MaxSize.
	Size int
	// Persistent makes a server serve every client, concurrently, until
	// its context ends (rping -P).
	Persistent bool
	// SRQ, if positive, makes a server's connections share one PD and one
	// shared receive queue of SRQ receives instead of a receive each: at
	// most SRQ clients may be in the middle of a ping at once (each holds
	// one receive from its message's arrival until the server reposts it).
	SRQ int
	// Verbose prints every ping (-v), Validate checks the ping the server
	// wrote back (-V), Debug traces each step (-d).
	Verbose, Validate, Debug bool
	// Rev, if not 0, is the only MPA revision a server accepts.
	Rev int
	// Options are connection options applied after rping's own. Those are
	// what rping over siw does: IRD = ORD = 1, a peer assumed to take one
	// Read at a time where no IRD/ORD is exchanged, and the private data
	// exactly as given (no iwarp-go peer trailer). A client offers what a
	// siw client offers, no CRC and no peer-to-peer; a server follows the
	// client's CRC bit and accepts every RTR type.
	Options []conn.Option
	// Out and Err are rping's stdout and stderr.
	Out, Err io.Writer
	// Ready, if not nil, is told a server's listening address.
	Ready func(net.Addr)
	// Listening, if not nil, is given a server's listener once it listens:
	// a metrics endpoint reports what the listener turns away.
	Listening func(*conn.Listener)

	pool *recvPool // the server's shared receive queue, with SRQ
}

// Check applies rping's limits, and words its refusals as rping does.
func (c *Config) Check() error {
	switch {
	case c.Size < MinSize || c.Size > MaxSize:
		//lint:ignore ST1005 rping's own message
		return fmt.Errorf("Invalid size %d (valid range is %d to %d)", c.Size, MinSize, MaxSize)
	case c.Count < 0:
		//lint:ignore ST1005 rping's own message
		return fmt.Errorf("Invalid count %d", c.Count)
	case c.Port < 0 || c.Port > 65535:
		//lint:ignore ST1005 rping's own message
		return fmt.Errorf("Invalid port %d", c.Port)
	case c.SRQ < 0 || c.SRQ > conn.MaxQueueDepth:
		return fmt.Errorf("shared receive queue depth %d: must be from 1 to %d", c.SRQ, conn.MaxQueueDepth)
	}
	return nil
}

func (c *Config) options(server bool) []conn.Option {
	opts := []conn.Option{conn.WithIRDORD(1, 1), conn.WithPeerIRD(1), conn.WithoutPeerTrailer(), conn.WithCRC(conn.CRCOff)}
	if server {
		opts = append(opts, conn.WithP2P(conn.RTRWrite|conn.RTRRead|conn.RTRSend))
	} else {
		opts = append(opts, conn.WithoutP2P())
	}
	return append(opts, c.Options...)
}

// start prints -d's account of the configuration and returns the writers
// the run uses: a persistent server's connections share them.
func (c *Config) start(role string) (out, errw io.Writer) {
	// A persistent server's connections share them, line by line.
	out, errw = syncwriter.New(c.Out), syncwriter.New(c.Err)
	if c.Debug {
		fmt.Fprintf(out, "%s\nport %d\nsize %d\ncount %d\n", role, c.Port, c.Size, c.Count)
	}
	return out, errw
}

// The numbers of rping's test states DISCONNECTED and ERROR, which its
// "wait for <state> state %d" messages print.
const (
	stateDisconnected = 10
	stateError        = 11
)

// errDisconnected: the peer went away (rping's DISCONNECTED state).
var errDisconnected = errors.New("disconnected")

// endpoint is one side's queue pair and buffers.
type endpoint struct {
	pd    *conn.PD
	qp    *conn.QP
	w     *waiter.Waiter
	recv  *conn.MR  // one 16-byte receive buffer, reposted after each use
	pool  *recvPool // instead of recv: the server's shared receive queue
	send  *conn.MR  // 2×16 bytes: the two advertisements of an iteration
	rdma  *conn.MR  // Read sink (server) / Write sink (client)
	start *conn.MR  // client only: the Read source
	debug bool
	out   io.Writer
	// Send completions seen and Sends posted: an advertisement buffer
	// is rewritten only after its Send completed.
	sendsDone, sendsPosted int
}

// newEndpoint creates one side's queue pair and buffers; with pool (a
// server's shared receive queue) the queue pair takes its receives from
// there and lives in pool's PD.
func newEndpoint(size int, client, debug bool, out io.Writer, pool *recvPool) (_ *endpoint, err error) {
	e := &endpoint{pd: conn.NewPD(), debug: debug, out: out, pool: pool}
	cq := conn.NewCQ(sqDepth * 2)
	caps := conn.QPCaps{SendDepth: sqDepth, RecvDepth: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}
	if pool != nil {
		e.pd, caps.SRQ = pool.pd, pool.srq
	}
	e.qp, err = e.pd.NewQP(cq, caps)
	if err != nil {
		return nil, err
	}
	e.w = waiter.New(cq, e.qp)
	defer func() {
		if err != nil {
			e.qp.Close()
		}
	}()
	if pool == nil {
		if e.recv, err = e.pd.Register(make([]byte, InfoLen), conn.LocalWrite); err != nil {
			return nil, err
		}
	}
	if e.send, err = e.pd.Register(make([]byte, 2*InfoLen), 0); err != nil {
		return nil, err
	}
	all := conn.LocalWrite | conn.RemoteRead | conn.RemoteWrite
	if e.rdma, err = e.pd.Register(make([]byte, size), all); err != nil {
		return nil, err
	}
	if client {
		if e.start, err = e.pd.Register(make([]byte, size), all); err != nil {
			return nil, err
		}
	}
	e.debugf("created pd, cq and qp; registered buffers of %d bytes", size)
	if pool == nil {
		if err = e.postRecv(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *endpoint) debugf(format string, a ...any) {
	if e.debug {
		fmt.Fprintf(e.out, format+"\n", a...)
	}
}

func (e *endpoint) postRecv() error {
	return e.qp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{e.recv.SGE(0, InfoLen)}})
}

// post posts one signaled work request, as rping signals all of them.
func (e *endpoint) post(op conn.Op, sge conn.SGE, remote conn.RemoteAddr) error {
	if err := e.qp.PostSend(conn.SendWR{Op: op, Flags: conn.Signaled, SGL: []conn.SGE{sge}, Remote: remote}); err != nil {
		if errors.Is(err, conn.ErrQPClosed) {
			return &waitError{want: "posting " + op.String(), state: stateDisconnected, cause: err}
		}
		return fmt.Errorf("post send error %w", err)
	}
	if op == conn.OpSend {
		e.sendsPosted++
	}
	return nil
}

// waitSends waits until every Send posted so far has completed.
func (e *endpoint) waitSends(ctx context.Context) error {
	for e.sendsDone < e.sendsPosted {
		wc, err := e.pop(ctx)
		if err != nil {
			return err
		}
		if wc.Op != conn.WCSend {
			return fmt.Errorf("unexpected %s completion", wc.Op)
		}
	}
	return nil
}

// pop returns the next completion. It returns errDisconnected when the
// connection ended: flushed work, or the queue pair is done with nothing
// left to report.
func (e *endpoint) pop(ctx context.Context) (conn.WorkCompletion, error) {
	wc, err := e.w.Next(ctx)
	switch {
	case waiter.Ended(err):
		return wc, errDisconnected
	case err != nil && wc.Status != conn.WCSuccess:
		return wc, fmt.Errorf("cq completion failed status %d (%s: %v)", wc.Status, wc.Status, err)
	case err != nil:
		return wc, err
	}
	switch wc.Op {
	case conn.WCSend:
		e.debugf("send completion")
		e.sendsDone++
	case conn.WCRDMAWrite:
		e.debugf("rdma write completion")
	case conn.WCRDMARead:
		e.debugf("rdma read completion")
	case conn.WCRecv:
		e.debugf("recv completion")
	}
	return wc, nil
}

// next returns the next completion other than a Send's: rping only counts
// those.
func (e *endpoint) next(ctx context.Context) (conn.WorkCompletion, error) {
	for {
		wc, err := e.pop(ctx)
		if err != nil || wc.Op != conn.WCSend {
			return wc, err
		}
	}
}

// expect waits for a completion of kind op. want is the rping state the
// caller waits for, named in rping's message when something else happens.
func (e *endpoint) expect(ctx context.Context, op conn.WCOpcode, want string) (conn.WorkCompletion, error) {
	wc, err := e.next(ctx)
	if err == nil && wc.Op != op {
		err = fmt.Errorf("unexpected %s completion", wc.Op)
	}
	if err != nil {
		state := stateError
		if errors.Is(err, errDisconnected) {
			state = stateDisconnected
		}
		return wc, &waitError{want: want, state: state, cause: err}
	}
	return wc, nil
}

// waitError is rping's "wait for <want> state <state>" failure.
type waitError struct {
	want  string
	state int
	cause error
}

func (e *waitError) Error() string {
	return fmt.Sprintf("wait for %s state %d", e.want, e.state)
}

func (e *waitError) Unwrap() error { return e.cause }

// disconnected reports whether err is rping's DISCONNECTED state.
func disconnected(err error) (*waitError, bool) {
	var se *waitError
	return se, errors.As(err, &se) && se.state == stateDisconnected
}

// expectRecv waits for the peer's next message, checks it the way rping
// does (exactly 16 bytes), decodes it and reposts the receive buffer.
func (e *endpoint) expectRecv(ctx context.Context, want string) (Info, error) {
	wc, err := e.expect(ctx, conn.WCRecv, want)
	if err != nil {
		return Info{}, err
	}
	if wc.ByteLen != InfoLen {
		if e.pool != nil {
			e.pool.post(wc.ID) // the connection ends; the buffer serves the others
		}
		return Info{}, fmt.Errorf("%w, size %d", errBogus, wc.ByteLen)
	}
	var info Info
	if e.pool != nil {
		// Any connection's message may be in any of the pool's buffers:
		// the completion names which.
		if info, err = e.pool.take(wc.ID); err != nil {
			return info, err
		}
	} else {
		if info, err = ParseInfo(e.recv.Bytes()); err != nil {
			return info, err
		}
		err = e.postRecv()
	}
	if err != nil {
		if errors.Is(err, conn.ErrQPClosed) {
			// The peer left between its message and the repost.
			return info, &waitError{want: want, state: stateDisconnected, cause: err}
		}
		return info, fmt.Errorf("post recv error: %w", err)
	}
	return info, nil
}

// close ends the connection: gracefully (rdma_disconnect) unless ctx was
// cancelled, which is an interruption and resets it.
func (e *endpoint) close(ctx context.Context) {
	if ctx.Err() != nil {
		e.qp.Abort()
		return
	}
	e.qp.Close()
}

func hostPort(addr string, port int) string {
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// recvPool is a server's shared receive queue of rping messages: one
// InfoLen buffer per receive, the receive's ID its index.
type recvPool struct {
	pd   *conn.PD
	srq  *conn.SRQ
	bufs *conn.MR
}

func newRecvPool(depth int) (*recvPool, error) {
	p := &recvPool{pd: conn.NewPD()}
	var err error
	if p.srq, err = p.pd.NewSRQ(conn.SRQCaps{Depth: depth, MaxSGE: 1}); err != nil {
		return nil, err
	}
	if p.bufs, err = p.pd.Register(make([]byte, depth*InfoLen), conn.LocalWrite); err != nil {
		return nil, err
	}
	for i := range depth {
		if err := p.post(uint64(i)); err != nil {
			p.srq.Close()
			return nil, err
		}
	}
	return p, nil
}

func (p *recvPool) post(id uint64) error {
	return p.srq.PostRecv(conn.RecvWR{ID: id, SGL: []conn.SGE{p.bufs.SGE(int(id)*InfoLen, InfoLen)}})
}

// take decodes the message in buffer id and reposts the buffer.
func (p *recvPool) take(id uint64) (Info, error) {
	if id*InfoLen >= uint64(p.bufs.Len()) {
		return Info{}, fmt.Errorf("a receive completion of unknown buffer %d", id)
	}
	off := int(id) * InfoLen
	info, perr := ParseInfo(p.bufs.Bytes()[off : off+InfoLen])
	if err := p.post(id); err != nil {
		return info, fmt.Errorf("post recv error: %w", err)
	}
	return info, perr
}
