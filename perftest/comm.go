package perftest

import (
	"context"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
)

// comm is the comm connection: an RC queue pair whose messages are Sends
// in strict lockstep, one receive posted at a time (perftest posts one
// before connecting and reposts it after each receive).
type comm struct {
	qp       *conn.QP
	scq, rcq *conn.CQ
	mr       *conn.MR // [0, MaxMessage): the receive; then the send
	role     Role
	in       [MaxMessage]byte
	wc       [1]conn.WorkCompletion
	// repostErr is why the receive could not be reposted; the next
	// receive reports it. (After the last message the peer may have
	// closed already.)
	repostErr error
}

const (
	commRecvID = 1
	commSendID = 2
)

func newComm(pd *conn.PD, role Role) (*comm, error) {
	c := &comm{role: role, scq: conn.NewCQ(2), rcq: conn.NewCQ(2)}
	var err error
	c.mr, err = pd.Register(make([]byte, 2*MaxMessage), conn.LocalWrite)
	if err != nil {
		return nil, err
	}
	c.qp, err = pd.NewQP(c.scq, conn.QPCaps{SendDepth: 1, RecvDepth: 1, MaxSendSGE: 1, MaxRecvSGE: 1, RecvCQ: c.rcq})
	if err != nil {
		c.mr.Deregister()
		return nil, err
	}
	if err := c.postRecv(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *comm) postRecv() error {
	return c.qp.PostRecv(conn.RecvWR{ID: commRecvID, SGL: []conn.SGE{c.mr.SGE(0, MaxMessage)}})
}

// exchange sends msg and returns the peer's message of the same step:
// the client sends first, the server answers. The returned slice is valid
// until the next exchange.
func (c *comm) exchange(ctx context.Context, what string, msg []byte) ([]byte, error) {
	if c.role == Client {
		if err := c.send(ctx, what, msg); err != nil {
			return nil, err
		}
		return c.recv(ctx, what)
	}
	in, err := c.recv(ctx, what)
	if err != nil {
		return nil, err
	}
	return in, c.send(ctx, what, msg)
}

func (c *comm) send(ctx context.Context, what string, msg []byte) error {
	if len(msg) > MaxMessage {
		return fmt.Errorf("%w: %s message of %d bytes", ErrProtocol, what, len(msg))
	}
	// The send half of the region is not in use: the previous Send has
	// completed.
	copy(c.mr.Bytes()[MaxMessage:], msg)
	err := c.qp.PostSend(conn.SendWR{ID: commSendID, Op: conn.OpSend, Flags: conn.Signaled,
		SGL: []conn.SGE{c.mr.SGE(MaxMessage, len(msg))}})
	if err != nil {
		return fmt.Errorf("perftest: sending the %s: %w", what, err)
	}
	if _, err := c.scq.Wait(ctx, c.wc[:]); err != nil {
		return fmt.Errorf("perftest: sending the %s: %w", what, err)
	}
	if err := c.wc[0].Err(); err != nil {
		return fmt.Errorf("%w: sending the %s on the comm connection: %w", ErrTest, what, err)
	}
	return nil
}

func (c *comm) recv(ctx context.Context, what string) ([]byte, error) {
	if c.repostErr != nil {
		return nil, fmt.Errorf("perftest: reposting the comm receive: %w", c.repostErr)
	}
	if _, err := c.rcq.Wait(ctx, c.wc[:]); err != nil {
		return nil, fmt.Errorf("perftest: waiting for the peer's %s: %w", what, err)
	}
	if err := c.wc[0].Err(); err != nil {
		return nil, fmt.Errorf("%w: receiving the peer's %s on the comm connection: %w", ErrTest, what, err)
	}
	n := int(c.wc[0].ByteLen)
	// The receive has completed, so its bytes are the program's to read.
	copy(c.in[:], c.mr.Bytes()[:n])
	c.repostErr = c.postRecv()
	return c.in[:n], nil
}

func (c *comm) close() {
	c.qp.Close()
	c.mr.Deregister()
}
