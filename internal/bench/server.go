package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/iwarp-go/iwarp-go/conn"
)

// benchServe answers bench sessions one at a time until a session marked
// final has ended or ctx is done.
func benchServe(ctx context.Context, ln *conn.Listener, log io.Writer) error {
	for {
		req, err := ln.AcceptRequest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s, err := parseSession(req.PrivateData())
		if err != nil {
			req.Reject(ctx, []byte(err.Error()))
			fmt.Fprintf(log, "bench server: refused %v: %v\n", req.RemoteAddr(), err)
			continue
		}
		if err := serveSession(ctx, req, s); err != nil {
			return fmt.Errorf("session %c/%c: %w", s.phase, s.op, err)
		}
		if s.final {
			return nil
		}
	}
}

// benchServerQP is the server's side of one session.
type benchServerQP struct {
	qp     *conn.QP
	cq     *conn.CQ
	region *conn.MR
	wcs    []conn.WorkCompletion
}

func serveSession(ctx context.Context, req *conn.ConnRequest, s benchSession) error {
	recvs := 4
	if s.op == 's' && s.phase == phaseBandwidth {
		recvs = int(s.credits)
	}
	sendDepth := max(recvs, 16)
	pd := conn.NewPD()
	cq := conn.NewCQ(2 * (recvs + sendDepth))
	qp, err := pd.NewQP(cq, conn.QPCaps{SendDepth: sendDepth, RecvDepth: recvs})
	if err != nil {
		req.Reject(ctx, nil)
		return err
	}
	defer qp.Close()
	b := &benchServerQP{qp: qp, cq: cq, wcs: make([]conn.WorkCompletion, 64)}
	b.region, err = pd.Register(make([]byte, s.size), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	if err != nil {
		req.Reject(ctx, nil)
		return err
	}
	// Every receive of a session shares one buffer: the data is not
	// looked at, and the stack places one message at a time.
	for i := 0; i < recvs; i++ {
		if err := qp.PostRecv(conn.RecvWR{SGL: []conn.SGE{b.region.SGE(0, int(s.size))}}); err != nil {
			req.Reject(ctx, nil)
			return err
		}
	}
	adv := rpingInfo{Addr: b.region.Remote(0).TO, RKey: uint32(b.region.STag()), Size: s.size}
	if err := req.Accept(ctx, qp, conn.WithPrivateData(appendSessionReply(nil, adv))); err != nil {
		return err
	}
	switch {
	case s.phase == phaseBandwidth && s.op == 's':
		err = b.returnCredits(ctx, s)
	case s.phase == phaseLatency && s.op != 'r':
		err = b.echo(ctx, s)
	default:
		// RDMA Write and Read need nothing from this side's program.
		select {
		case <-qp.Done():
		case <-ctx.Done():
		}
	}
	if errors.Is(err, errSessionOver) {
		err = nil
	}
	return err
}

// errSessionOver: the client closed the connection, the normal end.
var errSessionOver = errors.New("session over")

// poll returns completions, waiting for at least one. The flushed
// receives of a connection the client closed end the session.
func (b *benchServerQP) poll(ctx context.Context) ([]conn.WorkCompletion, error) {
	n := b.cq.Poll(b.wcs)
	if n == 0 {
		var err error
		if n, err = b.cq.Wait(ctx, b.wcs); err != nil {
			return nil, err
		}
	}
	for _, wc := range b.wcs[:n] {
		if wc.Status == conn.WCWRFlushErr {
			return nil, errSessionOver
		}
		if wc.Status != conn.WCSuccess {
			return nil, wc.Err()
		}
	}
	return b.wcs[:n], nil
}

// returnCredits is the receiver of a Send stream: it reposts each
// receive as its Send arrives and tells the sender how many receives it
// freed, every s.batch Sends and whenever a Send asks for an answer with
// the Solicited Event flag (the sender does so when it runs out).
func (b *benchServerQP) returnCredits(ctx context.Context, s benchSession) error {
	// Each credit message frees at least one credit, so no more than
	// s.credits of them are ever in flight: a slot per credit, and a send
	// queue as deep (serveSession sizes it).
	ring := int(s.credits)
	credMR, err := b.qp.PD().Register(make([]byte, 4*ring), 0)
	if err != nil {
		return err
	}
	rsgl := []conn.SGE{b.region.SGE(0, int(s.size))}
	pending, posted, done := 0, 0, 0
	for {
		wcs, err := b.poll(ctx)
		if err != nil {
			return err
		}
		solicited := false
		for _, wc := range wcs {
			switch wc.Op {
			case conn.WCRecv:
				if err := b.qp.PostRecv(conn.RecvWR{SGL: rsgl}); err != nil {
					return err
				}
				pending++
				solicited = solicited || wc.Flags&conn.WCSolicited != 0
			case conn.WCSend:
				done++
			}
		}
		if pending == 0 || (pending < int(s.batch) && !solicited) {
			continue
		}
		for posted-done >= ring {
			wcs, err := b.poll(ctx)
			if err != nil {
				return err
			}
			for _, wc := range wcs {
				if wc.Op == conn.WCSend {
					done++
				}
			}
		}
		slot := posted % ring
		binary.BigEndian.PutUint32(credMR.Bytes()[4*slot:], uint32(pending))
		if err := b.qp.PostSend(conn.SendWR{Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{credMR.SGE(4*slot, 4)}}); err != nil {
			return err
		}
		posted++
		pending = 0
	}
}

// echo answers each message of a latency session: a Send with a Send of
// the same size, a Write (announced by a zero-length Send) with a Write
// into the client's region and a zero-length Send.
func (b *benchServerQP) echo(ctx context.Context, s benchSession) error {
	rsgl := []conn.SGE{b.region.SGE(0, int(s.size))}
	answer := []conn.SendWR{{Op: conn.OpSend, SGL: rsgl}}
	if s.op == 'w' {
		answer = []conn.SendWR{
			{Op: conn.OpWrite, SGL: rsgl, Remote: conn.RemoteAddr{STag: stagOf(s.region.RKey), TO: s.region.Addr}},
			{Op: conn.OpSend},
		}
	}
	for {
		wcs, err := b.poll(ctx)
		if err != nil {
			return err
		}
		for _, wc := range wcs {
			if wc.Op != conn.WCRecv {
				continue
			}
			if err := b.qp.PostRecv(conn.RecvWR{SGL: rsgl}); err != nil {
				return err
			}
			// Unsignalled: a send-queue slot frees itself when its
			// message is out.
			if _, err := b.qp.PostSendBatch(answer); err != nil {
				return err
			}
		}
	}
}
