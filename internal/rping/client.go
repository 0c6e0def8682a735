package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/iwarp-go/iwarp-go/conn"
)

// errDataMismatch is -V's failure.
var errDataMismatch = errors.New("data mismatch")

// rpingClient connects to an rping server and runs cfg.count pings (0:
// until interrupted or the server disconnects).
func rpingClient(ctx context.Context, cfg *rpingConfig, out, errw io.Writer) error {
	e, err := newRpingEndpoint(cfg.size, true, cfg.debug, out)
	if err != nil {
		fmt.Fprintf(errw, "setup_qp failed: %v\n", err)
		return reported(err)
	}
	defer e.close(ctx)
	d := net.Dialer{Timeout: conn.DefaultSetupTimeout}
	if cfg.src != "" {
		la, err := net.ResolveTCPAddr("tcp", hostPort(cfg.src, 0))
		if err != nil {
			fmt.Fprintf(errw, "getaddrinfo failed (%v) - invalid hostname or IP address\n", err)
			return reported(err)
		}
		d.LocalAddr = la
	}
	c, err := d.DialContext(ctx, "tcp", hostPort(cfg.addr, cfg.port))
	if err != nil {
		fmt.Fprintf(errw, "connect error %v\n", err)
		return reported(err)
	}
	if err := e.qp.Client(ctx, c, cfg.opts...); err != nil {
		fmt.Fprintf(errw, "connect error %v\n", err)
		return reported(err)
	}
	e.debugf("rdma_connect successful")
	e.debugf("connected to %v: %s", e.qp.RemoteAddr(), describeSetup(e.qp.Negotiated()))
	err = rpingTestClient(ctx, cfg, e, out)
	if err == nil {
		// Let the last Send complete before the disconnect.
		err = e.waitSends(ctx)
	}
	e.close(ctx)
	fmt.Fprintln(errw, "client DISCONNECT EVENT...")
	var se *rpingStateError
	if errors.As(err, &se) && se.state == stateDisconnected && cfg.count == 0 {
		// Without a count, the server ending the connection ends the run,
		// and rping calls that success.
		fmt.Fprintln(errw, se)
		return nil
	}
	if err != nil {
		if errors.Is(err, errDataMismatch) {
			fmt.Fprintln(errw, "data mismatch!")
		}
		fmt.Fprintf(errw, "rping client failed: %v\n", err)
		return reported(err)
	}
	return nil
}

// rpingTestClient is rping's rping_test_client.
func rpingTestClient(ctx context.Context, cfg *rpingConfig, e *rpingEndpoint, out io.Writer) error {
	start := byte('A')
	srcAdv, sinkAdv := e.send.Bytes()[:rpingInfoLen], e.send.Bytes()[rpingInfoLen:]
	for ping := 0; cfg.count == 0 || ping < cfg.count; ping++ {
		// Both advertisement buffers are rewritten below; their Sends of
		// the last iteration must be done with them.
		if err := e.waitSends(ctx); err != nil {
			return err
		}
		start = fillPing(e.start.Bytes(), ping, start)
		if err := e.advertise(srcAdv, 0, e.start, cfg.size); err != nil {
			return err
		}
		if _, err := e.expectRecv(ctx, "RDMA_WRITE_ADV"); err != nil {
			return err
		}
		if err := e.advertise(sinkAdv, rpingInfoLen, e.rdma, cfg.size); err != nil {
			return err
		}
		if _, err := e.expectRecv(ctx, "RDMA_WRITE_COMPLETE"); err != nil {
			return err
		}
		if cfg.validate && !bytes.Equal(e.start.Bytes(), e.rdma.Bytes()) {
			return errDataMismatch
		}
		if cfg.verbose {
			fmt.Fprintf(out, "ping data: %s\n", cString(e.rdma.Bytes()))
		}
	}
	return nil
}

// advertise sends {VA, rkey, size} of mr from the advertisement buffer at
// off (rping_format_send followed by the Send).
func (e *rpingEndpoint) advertise(buf []byte, off int, mr *conn.MR, size int) error {
	info := rpingInfo{Addr: mr.Remote(0).TO, RKey: uint32(mr.STag()), Size: uint32(size)}
	appendRpingInfo(buf[:0], info)
	e.debugf("RDMA addr %x rkey %x len %d", info.Addr, info.RKey, info.Size)
	return e.post(conn.OpSend, e.send.SGE(off, rpingInfoLen), conn.RemoteAddr{})
}
