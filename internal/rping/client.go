package rping

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
)

// errDataMismatch is -V's failure.
var errDataMismatch = errors.New("data mismatch")

// Client connects to the rping server at cfg.Addr and runs cfg.Count
// pings. It describes every failure on cfg.Err in rping's words; the error
// it returns is for the exit status. Without a count, the server
// disconnecting ends the run successfully, as in rping; an interruption
// (ctx ending) is a failure.
func Client(ctx context.Context, cfg *Config) error {
	out, errw := cfg.start("client")
	fail := func(format string, a ...any) error {
		err := fmt.Errorf(format, a...)
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintln(errw, err)
		return err
	}
	e, err := newEndpoint(cfg.Size, true, cfg.Debug, out, nil)
	if err != nil {
		return fail("setup_qp failed: %v", err)
	}
	defer e.close(ctx)
	d := net.Dialer{Timeout: conn.DefaultSetupTimeout}
	if cfg.Src != "" {
		la, err := net.ResolveTCPAddr("tcp", hostPort(cfg.Src, 0))
		if err != nil {
			return fail("getaddrinfo failed (%v) - invalid hostname or IP address", err)
		}
		d.LocalAddr = la
	}
	c, err := d.DialContext(ctx, "tcp", hostPort(cfg.Addr, cfg.Port))
	if err != nil {
		return fail("connect error %v", err)
	}
	if err := e.qp.Client(ctx, c, cfg.options(false)...); err != nil {
		return fail("connect error %v", err)
	}
	e.debugf("rdma_connect successful")
	res := e.qp.Negotiated()
	e.debugf("connected to %v: %s", e.qp.RemoteAddr(), negotiated.Describe(res))
	serverSize, sizeKnown := parseServerSize(res.PeerPrivateData)
	n, err := testClient(ctx, cfg, e, out)
	if err == nil {
		// Let the last Send complete before the disconnect.
		err = e.waitSends(ctx)
	}
	e.close(ctx)
	fmt.Fprintln(errw, "client DISCONNECT EVENT...")
	if ctx.Err() != nil {
		err = fmt.Errorf("interrupted after %d pings", n)
	} else if se, ok := disconnected(err); ok && cfg.Count == 0 {
		// Without a count, the server ending the connection ends the run,
		// and rping calls that success.
		fmt.Fprintln(errw, se)
		return nil
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, errDataMismatch) {
		fmt.Fprintln(errw, "data mismatch!")
	}
	fmt.Fprintf(errw, "rping client failed: %v\n", err)
	if _, ok := disconnected(err); ok && n == 0 {
		// The server left before it read the first ping. rping says
		// nothing more; this says the likely reason.
		switch {
		case sizeKnown && serverSize < cfg.Size:
			fmt.Fprintf(errw, "the server takes pings of at most %d bytes (its -S), this client sends %d (-S %d)\n", serverSize, cfg.Size, cfg.Size)
		case !sizeKnown:
			fmt.Fprintf(errw, "the server left before it read the first ping: an rping server does that when the pings (-S %d) are larger than its own -S\n", cfg.Size)
		}
	}
	return err
}

// testClient is rping's rping_test_client. It returns how many pings
// completed.
func testClient(ctx context.Context, cfg *Config, e *endpoint, out io.Writer) (int, error) {
	start := byte('A')
	srcAdv, sinkAdv := e.send.Bytes()[:InfoLen], e.send.Bytes()[InfoLen:]
	ping := 0
	for ; cfg.Count == 0 || ping < cfg.Count; ping++ {
		// Both advertisement buffers are rewritten below; their Sends of
		// the last iteration must be done with them.
		if err := e.waitSends(ctx); err != nil {
			return ping, err
		}
		start = FillPing(e.start.Bytes(), ping, start)
		if err := e.advertise(srcAdv, 0, e.start, cfg.Size); err != nil {
			return ping, err
		}
		if _, err := e.expectRecv(ctx, "RDMA_WRITE_ADV"); err != nil {
			return ping, err
		}
		if err := e.advertise(sinkAdv, InfoLen, e.rdma, cfg.Size); err != nil {
			return ping, err
		}
		if _, err := e.expectRecv(ctx, "RDMA_WRITE_COMPLETE"); err != nil {
			return ping, err
		}
		if cfg.Validate && !bytes.Equal(e.start.Bytes(), e.rdma.Bytes()) {
			return ping, errDataMismatch
		}
		if cfg.Verbose {
			fmt.Fprintf(out, "ping data: %s\n", CString(e.rdma.Bytes()))
		}
	}
	return ping, nil
}

// advertise sends {VA, rkey, size} of mr from the advertisement buffer at
// off (rping_format_send followed by the Send).
func (e *endpoint) advertise(buf []byte, off int, mr *conn.MR, size int) error {
	info := Info{Addr: mr.Remote(0).TO, RKey: uint32(mr.STag()), Size: uint32(size)}
	AppendInfo(buf[:0], info)
	e.debugf("RDMA addr %x rkey %x len %d", info.Addr, info.RKey, info.Size)
	return e.post(conn.OpSend, e.send.SGE(off, InfoLen), conn.RemoteAddr{})
}
