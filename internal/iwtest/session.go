package iwtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/negotiated"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// Client connects to the iwtest server at cfg.Addr and drives the tests of
// cfg. It prints the lines of PROTOCOL.md §8 on cfg.Out and diagnostics
// on cfg.Err, and returns nil when the run succeeded in the sense of §8
// (exit status 0), ErrFailed otherwise.
func Client(ctx context.Context, cfg *Config) error {
	return verdict(client(ctx, newSession(cfg, false)))
}

// Serve waits for one connection on cfg.Addr (for cfg.Wait at most) and
// runs the session its client drives, or rejects it with cfg.Reject.
// Output and result are as for Client.
func Serve(ctx context.Context, cfg *Config) error {
	return verdict(serve(ctx, newSession(cfg, true)))
}

func verdict(ok bool) error {
	if !ok {
		return ErrFailed
	}
	return nil
}

// outcome is the exit decision of PROTOCOL.md §8.
func (e *endpoint) outcome(r *results, fatal, terminated bool) bool {
	e.printf("SUMMARY role=%s ok=%d failed=%d\n", e.role(), r.ok, r.failed)
	switch {
	case e.cfg.Provoke != 0:
		return terminated
	case e.cfg.ExpectError:
		return e.dead || r.failed > 0
	}
	return !fatal && r.failed == 0
}

// close ends the connection at the end of a session: gracefully unless
// it failed, and after the queue pair has finished, says how it ended.
func (e *endpoint) close() {
	if e.dead {
		e.reportEnd()
	}
	if err := e.qp.Close(); err != nil {
		e.errorf("closing: %v", err)
	}
	if e.dead {
		e.reportEnd()
	}
}

func client(ctx context.Context, cfg *session) bool {
	e, err := newEndpoint(cfg)
	if err != nil {
		fmt.Fprintf(cfg.Err, "iwtest: %v\n", err)
		return false
	}
	// The receive for the server's HELLO is posted before anything is
	// sent (PROTOCOL.md §3).
	if err := e.postCtrlRecv(); err != nil {
		return false
	}
	opts := append(cfg.options(), conn.WithPrivateData([]byte(cfg.PrivateData)))
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = e.qp.Connect(cctx, "tcp", net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port)), opts...)
	cancel()
	if err != nil {
		var rej *mpa.RejectedError
		if errors.As(err, &rej) {
			ird, ord := 0, 0
			if rej.Reply.HasIRDORD {
				ird, ord = int(rej.Reply.IRDORD.IRD), int(rej.Reply.IRDORD.ORD)
			}
			// status: what rdma_cm reports for an MPA Reply with the R
			// bit (-ECONNRESET), so both programs' lines read alike.
			e.printf("REJECT role=client status=%d %s\n", -int(syscall.ECONNRESET), pdataLine(ird, ord, rej.PrivateData))
			return cfg.ExpectReject
		}
		e.errorf("connect: %v", err)
		e.printf("CONNECTION event=CONNECT_ERROR error=%q\n", err.Error())
		return false
	}
	res := e.qp.Negotiated()
	ird, ord := cfg.readLimits(res)
	e.printf("ESTABLISHED role=client %s%s\n", pdataLine(ird, ord, res.PeerPrivateData), negotiated.Fields(res))
	if cfg.ExpectReject {
		e.errorf("the connection was accepted, a reject was expected")
		e.close()
		return false
	}

	var r results
	fatal, terminated := false, false
	if err := e.sendCtrl(ctx, message{Type: msgHello, Size: cfg.maxsize, Iter: uint32(cfg.Iters)}); err != nil {
		fatal = true
	} else if m, err := e.recvCtrl(ctx, msgHello, nil); err != nil {
		fatal = true
	} else if m.Status != 0 {
		e.errorf("the server refused the session (status %s)", status(m.Status))
		fatal = true
	}
	for _, t := range cfg.Tests {
		for _, size := range cfg.Sizes {
			for i := 0; i < cfg.Iters && !fatal; i++ {
				for d := uint8(0); d < 2 && !fatal; d++ {
					if cfg.Dirs&(1<<d) == 0 {
						continue
					}
					ph := phase{test: t, dir: d, iter: uint32(i), size: size}
					st, err := e.clientPhase(ctx, &ph)
					r.add(e, &ph, st)
					terminated = terminated || st == stTerminated
					if err != nil || st == stTerminated || st == stNotTerminated {
						fatal = true
					}
				}
			}
		}
	}
	r.flushAll(e)
	if !fatal {
		err := e.postCtrlRecv()
		if err == nil {
			err = e.sendCtrl(ctx, message{Type: msgBye})
		}
		if err == nil {
			_, err = e.recvCtrl(ctx, msgBye, nil)
		}
		fatal = err != nil
	}
	e.close()
	return e.outcome(&r, fatal, terminated)
}

func serve(ctx context.Context, cfg *session) bool {
	addr := cfg.Addr
	if addr == "" {
		addr = "0.0.0.0"
	}
	ln, err := conn.Listen(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(cfg.Port)), cfg.options()...)
	if err != nil {
		fmt.Fprintf(cfg.Err, "iwtest: listen on %s:%d: %v\n", addr, cfg.Port, err)
		return false
	}
	defer ln.Close()
	fmt.Fprintf(cfg.Out, "LISTENING port=%d\n", ln.Addr().(*net.TCPAddr).Port)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	if cfg.Listening != nil {
		cfg.Listening(ln)
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	req, err := ln.AcceptRequest(wctx)
	cancel()
	if err != nil {
		fmt.Fprintf(cfg.Err, "iwtest: no connection request: %v\n", err)
		return false
	}
	f := req.Request()
	ird, ord := 0, 0
	offered := "none"
	if f.HasIRDORD {
		// rdma_cm's view, as the C program prints it: the initiator's ORD
		// is what the responder must take (its IRD), and its IRD what the
		// responder may issue.
		ird, ord = int(min(f.IRDORD.ORD, 128)), int(min(f.IRDORD.IRD, 128))
		if f.IRDORD.P2P {
			offered = strings.ToLower(f.IRDORD.RTR.String())
		}
	}
	fmt.Fprintf(cfg.Out, "CONNECT role=server %s mpa_rev=%d enhanced=%s crc=%s p2p=%s\n", pdataLine(ird, ord, req.PrivateData()),
		f.Rev, negotiated.YesNo(f.Enhanced()), negotiated.OnOff(f.Flags&mpa.FlagCRC != 0), offered)
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.Reject {
		err := req.Reject(rctx, []byte(cfg.PrivateData))
		fmt.Fprintf(cfg.Out, "REJECTED role=server private_data_len=%d\n", len(cfg.PrivateData))
		if err != nil {
			fmt.Fprintf(cfg.Err, "iwtest: reject: %v\n", err)
		}
		return err == nil
	}
	if cfg.Rev != 0 && int(f.Rev) != cfg.Rev {
		fmt.Fprintf(cfg.Err, "iwtest: rejecting a request of MPA revision %d (this server takes revision %d only)\n", f.Rev, cfg.Rev)
		_ = req.Reject(rctx, nil)
		return false
	}
	e, err := newEndpoint(cfg)
	if err != nil {
		fmt.Fprintf(cfg.Err, "iwtest: %v\n", err)
		_ = req.Reject(rctx, nil)
		return false
	}
	// The receive for HELLO is posted before the connection is accepted.
	if err := e.postCtrlRecv(); err != nil {
		return false
	}
	if err := req.Accept(rctx, e.qp, conn.WithPrivateData([]byte(cfg.PrivateData))); err != nil {
		e.errorf("accept: %v", err)
		return false
	}
	res := e.qp.Negotiated()
	ird, ord = cfg.readLimits(res)
	e.printf("ESTABLISHED role=server ird=%d ord=%d%s\n", ird, ord, negotiated.Fields(res))

	var r results
	fatal, terminated, bye := false, false, false
	hello := message{Type: msgHello}
	if m, err := e.recvCtrl(ctx, msgHello, nil); err != nil {
		fatal = true
	} else if m.Size > cfg.maxsize {
		e.errorf("the client wants %d-byte messages, the limit is %d (-S)", m.Size, cfg.maxsize)
		hello.Status = uint8(stLength)
	}
	if !fatal {
		err := e.postCtrlRecv()
		if err == nil {
			err = e.sendCtrl(ctx, hello)
		}
		fatal = err != nil || hello.Status != 0
	}
	for !fatal {
		m, err := e.recvCtrl(ctx, 0, nil)
		if err != nil {
			fatal = true
			break
		}
		if m.Type == msgBye {
			bye = true
			break
		}
		if m.Type != msgBegin || m.Test < TestWrite || m.Test >= numTests || m.Dir > 1 || m.Size < 1 || m.Size > cfg.maxsize {
			e.errorf("unexpected message %s (test %d, dir %d, size %d)", m.Type, m.Test, m.Dir, m.Size)
			fatal = true
			break
		}
		ph := phase{test: m.Test, dir: m.Dir, iter: m.Iter, size: m.Size}
		st, err := e.serverPhase(ctx, &ph, &m)
		r.add(e, &ph, st)
		terminated = terminated || st == stTerminated
		if err != nil || st == stTerminated || st == stNotTerminated {
			fatal = true
		}
	}
	r.flushAll(e)
	if bye {
		if err := e.sendCtrl(ctx, message{Type: msgBye}); err != nil {
			fatal = true
		} else {
			// The client disconnects after BYE.
			select {
			case <-e.qp.Done():
			case <-time.After(cfg.Timeout):
				e.errorf("the client did not disconnect within %v", cfg.Timeout)
			case <-ctx.Done():
			}
		}
	}
	e.close()
	return e.outcome(&r, fatal, terminated)
}
