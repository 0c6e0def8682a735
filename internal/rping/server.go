package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
)

// rpingServe listens and serves one client, or with -P every client until
// ctx ends.
func rpingServe(ctx context.Context, cfg *rpingConfig, out, errw io.Writer, ready func(net.Addr)) error {
	addr := cfg.addr
	if addr == "" {
		addr = "0.0.0.0" // rping binds INADDR_ANY unless -a says otherwise
	}
	ln, err := conn.Listen(ctx, "tcp", hostPort(addr, cfg.port), cfg.opts...)
	if err != nil {
		fmt.Fprintf(errw, "rdma_bind_addr: %v\n", err)
		return reported(err)
	}
	defer ln.Close()
	if cfg.debug {
		fmt.Fprintf(out, "rdma_bind_addr successful\nrdma_listen\n")
	}
	if ready != nil {
		ready(ln.Addr())
	}
	if !cfg.persistent {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			return err
		}
		if err := rpingServeConn(ctx, cfg, req, out, errw); err != nil {
			fmt.Fprintf(errw, "rping server failed: %v\n", err)
			return reported(err)
		}
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // a persistent server runs until it is stopped
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rpingServeConn(ctx, cfg, req, out, errw); err != nil {
				fmt.Fprintf(errw, "rping server failed: %v\n", err)
			}
		}()
	}
}

// rpingServeConn accepts one connection request and runs rping's server
// loop on it until the client disconnects, which is the normal end.
func rpingServeConn(ctx context.Context, cfg *rpingConfig, req *conn.ConnRequest, out, errw io.Writer) error {
	if rev := int(req.Request().Rev); cfg.mpa.rev != 0 && rev != cfg.mpa.rev {
		req.Reject(ctx, nil)
		return fmt.Errorf("rejected a connection request of MPA revision %d (--mpa-rev %d)", rev, cfg.mpa.rev)
	}
	e, err := newRpingEndpoint(cfg.size, false, cfg.debug, out)
	if err != nil {
		req.Reject(ctx, nil)
		return fmt.Errorf("setup_qp failed: %w", err)
	}
	defer e.close(ctx)
	e.debugf("accepting client connection request")
	if err := req.Accept(ctx, e.qp); err != nil {
		fmt.Fprintf(errw, "connect error %v\n", err)
		return err
	}
	e.debugf("ESTABLISHED")
	e.debugf("connection from %v: %s", req.RemoteAddr(), describeSetup(e.qp.Negotiated()))
	err = rpingTestServer(ctx, cfg, e, out)
	var se *rpingStateError
	if errors.As(err, &se) && se.state == stateDisconnected {
		fmt.Fprintln(errw, "server DISCONNECT EVENT...")
		fmt.Fprintln(errw, se)
		return nil
	}
	return err
}

// rpingTestServer is rping's rping_test_server: per iteration, take the
// client's source advertisement, RDMA Read it, say "go ahead", take the
// sink advertisement, RDMA Write the data back, say "go ahead".
func rpingTestServer(ctx context.Context, cfg *rpingConfig, e *rpingEndpoint, out io.Writer) error {
	goAhead := e.send.SGE(0, rpingInfoLen) // never formatted: rping sends zeros
	for {
		src, err := e.expectRecv(ctx, "RDMA_READ_ADV")
		if err != nil {
			return err
		}
		e.debugf("Received rkey %x addr %x len %d from peer", src.RKey, src.Addr, src.Size)
		e.debugf("server received sink adv")
		if int(src.Size) > e.rdma.Len() {
			return fmt.Errorf("the client's ping size %d exceeds this server's -S %d", src.Size, e.rdma.Len())
		}
		remote := conn.RemoteAddr{STag: stagOf(src.RKey), TO: src.Addr}
		if err := e.post(conn.OpRead, e.rdma.SGE(0, int(src.Size)), remote); err != nil {
			return err
		}
		e.debugf("server posted rdma read req ")
		if _, err := e.expect(ctx, conn.WCRDMARead, "RDMA_READ_COMPLETE"); err != nil {
			return err
		}
		e.debugf("server received read complete")
		if cfg.verbose {
			fmt.Fprintf(out, "server ping data: %s\n", cString(e.rdma.Bytes()))
		}
		if err := e.post(conn.OpSend, goAhead, conn.RemoteAddr{}); err != nil {
			return err
		}
		e.debugf("server posted go ahead")

		sink, err := e.expectRecv(ctx, "RDMA_WRITE_ADV")
		if err != nil {
			return err
		}
		e.debugf("Received rkey %x addr %x len %d from peer", sink.RKey, sink.Addr, sink.Size)
		e.debugf("server received sink adv")
		// rping echoes strlen(rdma_buf) + 1 bytes: the ping text and its NUL.
		n := min(len(cString(e.rdma.Bytes()))+1, e.rdma.Len())
		e.debugf("rdma write from lkey %x laddr %x len %d", uint32(e.rdma.STag()), e.rdma.Remote(0).TO, n)
		remote = conn.RemoteAddr{STag: stagOf(sink.RKey), TO: sink.Addr}
		if err := e.post(conn.OpWrite, e.rdma.SGE(0, n), remote); err != nil {
			return err
		}
		if _, err := e.expect(ctx, conn.WCRDMAWrite, "RDMA_WRITE_COMPLETE"); err != nil {
			return err
		}
		e.debugf("server rdma write complete ")
		if err := e.post(conn.OpSend, goAhead, conn.RemoteAddr{}); err != nil {
			return err
		}
		e.debugf("server posted go ahead")
	}
}
