package rping

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/stag"
)

// Serve listens on cfg.Addr and serves one client or, with
// cfg.Persistent, every client until ctx ends. It describes every failure
// on cfg.Err in rping's words; the error it returns is for the exit
// status. A connection that fails before its first ping (setup cut short,
// the client gone, or not an rping client) is logged and does not count:
// a one-shot server waits for the next. When ctx ends, Serve ends every
// connection and returns nil: being stopped is the normal end of a
// server.
func Serve(ctx context.Context, cfg *Config) error {
	out, errw := cfg.start("server")
	addr := cfg.Addr
	if addr == "" {
		addr = "0.0.0.0" // rping binds INADDR_ANY unless -a says otherwise
	}
	ln, err := conn.Listen(ctx, "tcp", hostPort(addr, cfg.Port), cfg.options(true)...)
	if err != nil {
		fmt.Fprintf(errw, "rdma_bind_addr: %v\n", err)
		return err
	}
	defer ln.Close()
	if cfg.Debug {
		fmt.Fprintf(out, "rdma_bind_addr successful\nrdma_listen\n")
	}
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	if cfg.Listening != nil {
		cfg.Listening(ln)
	}
	if cfg.SRQ > 0 {
		pool, err := newRecvPool(cfg.SRQ)
		if err != nil {
			fmt.Fprintf(errw, "ibv_create_srq: %v\n", err)
			return err
		}
		defer pool.srq.Close() // after every connection ended (wg below)
		c := *cfg
		c.pool = pool
		cfg = &c
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(errw, "rdma_get_request: %v\n", err)
			return err
		}
		if cfg.Persistent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveOne(ctx, cfg, req, out, errw)
			}()
			continue
		}
		if counted, err := serveOne(ctx, cfg, req, out, errw); counted || ctx.Err() != nil {
			return err
		}
	}
}

// serveOne serves one connection request and reports how it went. It
// returns whether the connection counts as a client's (it reached its
// first ping, or the server refused it by its own rule) and the client's
// failure, already described.
func serveOne(ctx context.Context, cfg *Config, req *conn.ConnRequest, out, errw io.Writer) (bool, error) {
	counted, err := serveConn(ctx, cfg, req, out, errw)
	switch {
	case ctx.Err() != nil:
		return true, nil // stopped: the caller says so
	case !counted:
		fmt.Fprintf(errw, "rping server: ignored a connection from %v: %v\n", req.RemoteAddr(), err)
		return false, nil
	case err != nil:
		fmt.Fprintf(errw, "rping server failed: %v\n", err)
	}
	return true, err
}

// errNoPing: the connection ended before its first ping.
var errNoPing = errors.New("disconnected before its first ping")

// serveConn accepts one connection request and runs rping's server loop on
// it until the client disconnects, which is the normal end.
func serveConn(ctx context.Context, cfg *Config, req *conn.ConnRequest, out, errw io.Writer) (counted bool, _ error) {
	if rev := int(req.Request().Rev); cfg.Rev != 0 && rev != cfg.Rev {
		req.Reject(ctx, nil)
		return true, fmt.Errorf("rejected a connection request of MPA revision %d (this server takes revision %d only)", rev, cfg.Rev)
	}
	e, err := newEndpoint(cfg.Size, false, cfg.Debug, out, cfg.pool)
	if err != nil {
		req.Reject(ctx, nil)
		return true, fmt.Errorf("setup_qp failed: %w", err)
	}
	defer e.close(ctx)
	e.debugf("accepting client connection request")
	if err := req.Accept(ctx, e.qp, conn.WithPrivateData(appendServerSize(nil, cfg.Size))); err != nil {
		return false, fmt.Errorf("connect error %v", err)
	}
	e.debugf("ESTABLISHED")
	e.debugf("connection from %v: %s", req.RemoteAddr(), negotiated.Describe(e.qp.Negotiated()))
	n, err := testServer(ctx, cfg, e, out)
	if se, ok := disconnected(err); ok {
		if n == 0 {
			return false, errNoPing
		}
		fmt.Fprintln(errw, "server DISCONNECT EVENT...")
		fmt.Fprintln(errw, se)
		return true, nil
	}
	return n > 0, err
}

// testServer is rping's rping_test_server: per iteration, take the
// client's source advertisement, RDMA Read it, say "go ahead", take the
// sink advertisement, RDMA Write the data back, say "go ahead". It
// returns how many source advertisements it took.
func testServer(ctx context.Context, cfg *Config, e *endpoint, out io.Writer) (int, error) {
	goAhead := e.send.SGE(0, InfoLen) // never formatted: rping sends zeros
	for n := 0; ; n++ {
		src, err := e.expectRecv(ctx, "RDMA_READ_ADV")
		if err != nil {
			return n, err
		}
		e.debugf("Received rkey %x addr %x len %d from peer", src.RKey, src.Addr, src.Size)
		e.debugf("server received sink adv")
		if int(src.Size) > e.rdma.Len() {
			return n + 1, fmt.Errorf("the client's ping size %d exceeds this server's -S %d", src.Size, e.rdma.Len())
		}
		remote := conn.RemoteAddr{STag: stag.STag(src.RKey), TO: src.Addr}
		if err := e.post(conn.OpRead, e.rdma.SGE(0, int(src.Size)), remote); err != nil {
			return n + 1, err
		}
		e.debugf("server posted rdma read req ")
		if _, err := e.expect(ctx, conn.WCRDMARead, "RDMA_READ_COMPLETE"); err != nil {
			return n + 1, err
		}
		e.debugf("server received read complete")
		if cfg.Verbose {
			fmt.Fprintf(out, "server ping data: %s\n", CString(e.rdma.Bytes()))
		}
		if err := e.post(conn.OpSend, goAhead, conn.RemoteAddr{}); err != nil {
			return n + 1, err
		}
		e.debugf("server posted go ahead")

		sink, err := e.expectRecv(ctx, "RDMA_WRITE_ADV")
		if err != nil {
			return n + 1, err
		}
		e.debugf("Received rkey %x addr %x len %d from peer", sink.RKey, sink.Addr, sink.Size)
		e.debugf("server received sink adv")
		// rping echoes strlen(rdma_buf) + 1 bytes: the ping text and its NUL.
		size := min(len(CString(e.rdma.Bytes()))+1, e.rdma.Len())
		e.debugf("rdma write from lkey %x laddr %x len %d", uint32(e.rdma.STag()), e.rdma.Remote(0).TO, size)
		remote = conn.RemoteAddr{STag: stag.STag(sink.RKey), TO: sink.Addr}
		if err := e.post(conn.OpWrite, e.rdma.SGE(0, size), remote); err != nil {
			return n + 1, err
		}
		if _, err := e.expect(ctx, conn.WCRDMAWrite, "RDMA_WRITE_COMPLETE"); err != nil {
			return n + 1, err
		}
		e.debugf("server rdma write complete ")
		if err := e.post(conn.OpSend, goAhead, conn.RemoteAddr{}); err != nil {
			return n + 1, err
		}
		e.debugf("server posted go ahead")
	}
}
