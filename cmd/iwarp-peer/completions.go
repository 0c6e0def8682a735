package main

import (
	"context"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
)

// completions hands out the completions of one CQ by kind. Completions of
// other kinds stay queued, in order, for a later call: a program waiting
// for its reply should not lose the completion of its own Send.
type completions struct {
	cq      *conn.CQ
	qp      *conn.QP
	buf     [32]conn.WorkCompletion
	pending []conn.WorkCompletion
}

func newCompletions(cq *conn.CQ, qp *conn.QP) *completions {
	return &completions{cq: cq, qp: qp, pending: make([]conn.WorkCompletion, 0, 64)}
}

// wait returns the oldest queued completion of kind op, waiting for one.
// An unsuccessful completion of any kind is returned as an error at once.
func (c *completions) wait(ctx context.Context, op conn.WCOpcode) (conn.WorkCompletion, error) {
	for {
		for i, wc := range c.pending {
			if wc.Status != conn.WCSuccess {
				c.pending = append(c.pending[:i], c.pending[i+1:]...)
				return wc, fmt.Errorf("%s work request %d: %w", wc.Op, wc.ID, wc.Err())
			}
			if wc.Op == op {
				c.pending = append(c.pending[:i], c.pending[i+1:]...)
				return wc, nil
			}
		}
		if err := c.fill(ctx); err != nil {
			return conn.WorkCompletion{}, err
		}
	}
}

// fill waits for completions and queues them.
func (c *completions) fill(ctx context.Context) error {
	for {
		if n := c.cq.Poll(c.buf[:]); n > 0 {
			c.pending = append(c.pending, c.buf[:n]...)
			return nil
		}
		select {
		case <-c.cq.Ready():
		case <-c.qp.Done():
			if n := c.cq.Poll(c.buf[:]); n > 0 {
				c.pending = append(c.pending, c.buf[:n]...)
				return nil
			}
			return fmt.Errorf("connection ended: %w", c.qp.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
