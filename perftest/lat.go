package perftest

import (
	"context"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/stag"
)

func stagOf(rkey uint32) stag.STag { return stag.STag(rkey) }

// latency runs one latency measurement: perftest takes the time of every
// posting and reports the spread of the intervals between them.
func (s *session) latency(ctx context.Context, size int) (LatReport, error) {
	st := s.s
	duration := st.Duration > 0
	iters := uint64(st.Iters)
	var posted []int64
	if !duration {
		posted = make([]int64, 0, iters)
	}
	rtt := 2
	if st.Test == ReadLat || st.Test == AtomicLat {
		rtt = 1
	}
	l := latRun{s: s, size: size, iters: iters, duration: duration, posted: posted}
	var err error
	switch st.Test {
	case WriteLat:
		err = l.write(ctx)
	case ReadLat, AtomicLat:
		err = l.read(ctx)
	default:
		err = l.send(ctx)
	}
	if err != nil {
		return LatReport{}, err
	}
	if duration {
		return latDurationResult(size, l.sampled, l.ph.window(), rtt), nil
	}
	return latResult(size, l.posted, rtt), nil
}

// latRun is the state of one latency measurement on queue pair 0.
type latRun struct {
	s        *session
	size     int
	iters    uint64
	duration bool
	posted   []int64
	ph       phases
	sampled  uint64 // duration runs: round trips completed while sampling
	w        waiter
	wcs      [1]conn.WorkCompletion
}

// over reports whether the run has ended: scnt messages sent and rcnt
// received of iters, or the duration has run out.
func (l *latRun) over(scnt, rcnt uint64) bool {
	if l.duration {
		return l.ph.at(now())
	}
	return scnt >= l.iters && rcnt >= l.iters
}

// post records the time of posting message k (counted from 1), posts wr
// on queue pair 0 and waits for its completion (every latency message is
// signalled).
func (l *latRun) post(ctx context.Context, wr *conn.SendWR, k uint64, what string) error {
	if !l.duration {
		l.posted = append(l.posted, now())
	}
	if err := l.s.qps[0].PostSend(*wr); err != nil {
		return fmt.Errorf("%w: posting %s %d: %w", ErrTest, what, k, err)
	}
	if _, err := l.w.wait(ctx, l.s.scq, l.wcs[:], l.s.qps[:1], 0); err != nil {
		return err
	}
	return completion(&l.wcs[0], what)
}

// write is run_iter_lat_write: the server writes first; each side then
// waits until the last byte of its buffer holds the peer's count, and
// answers with a Write of its own whose last byte is its count.
func (l *latRun) write(ctx context.Context) error {
	s := l.s
	qp := s.qps[0]
	d := s.proto.PeerDest(0)
	src := s.bufs.data[0]
	sink := s.bufs.sink[0]
	last := l.size - 1
	wr := conn.SendWR{ID: 0, Op: conn.OpWrite, Flags: conn.Signaled, SGL: []conn.SGE{src.SGE(0, l.size)},
		Remote: conn.RemoteAddr{STag: stagOf(d.RKey), TO: d.VAddr}}
	l.ph = newPhases(s.s, now())
	var scnt, rcnt uint64
	for !l.over(scnt, rcnt) {
		if (l.duration || rcnt < l.iters) && !(scnt < 1 && s.role == Server) {
			rcnt++
			want := byte(rcnt)
			deadline := int64(0)
			if l.duration {
				deadline = l.ph.end
			}
			if err := spin(ctx, qp, func() bool { return loadByte(sink, last) == want }, deadline); err != nil {
				return err
			}
		}
		if !(l.duration || scnt < l.iters) {
			continue
		}
		scnt++
		// The previous Write has completed, so the source is free.
		src.Bytes()[last] = byte(scnt)
		if err := l.post(ctx, &wr, scnt, "RDMA Write"); err != nil {
			return err
		}
		if l.ph.sampling {
			l.sampled++
		}
	}
	return nil
}

// read is run_iter_lat: one RDMA Read (or atomic) at a time (the client
// only).
func (l *latRun) read(ctx context.Context) error {
	s := l.s
	d := s.proto.PeerDest(0)
	wr := conn.SendWR{ID: 0, Op: conn.OpRead, Flags: conn.Signaled, SGL: []conn.SGE{s.bufs.data[0].SGE(0, l.size)},
		Remote: conn.RemoteAddr{STag: stagOf(d.RKey), TO: d.VAddr}}
	what := "RDMA Read"
	if s.s.Test == AtomicLat {
		wr.Op, what = s.s.atomicOp()
		wr.Atomic = s.s.atomicArgs()
	}
	l.ph = newPhases(s.s, now())
	for k := uint64(1); !l.over(k-1, l.iters); k++ {
		if err := l.post(ctx, &wr, k, what); err != nil {
			return err
		}
		if l.ph.sampling {
			l.sampled++
		}
	}
	return nil
}

// send is run_iter_lat_send: the client sends first; each side waits for
// the peer's Send (reposting the receive while more are to come) and
// answers. Every Send is signalled (CQ moderation is capped by the TX
// depth of 1).
func (l *latRun) send(ctx context.Context) error {
	s := l.s
	qp := s.qps[0]
	wr := conn.SendWR{ID: 0, Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{s.bufs.data[0].SGE(0, l.size)}}
	recv := conn.RecvWR{ID: 0, SGL: []conn.SGE{s.bufs.recv[0].SGE(0, l.size)}}
	rx := uint64(s.s.rxDepth)
	var rwcs [1]conn.WorkCompletion
	var rw waiter
	l.ph = newPhases(s.s, now())
	var scnt, rcnt uint64
	for !l.over(scnt, rcnt) {
		if (l.duration || rcnt < l.iters) && !(scnt < 1 && s.role == Client) {
			deadline := int64(0)
			if l.duration {
				deadline = l.ph.end
			}
			got, err := rw.wait(ctx, s.rcq, rwcs[:], s.qps[:1], deadline)
			if err != nil {
				return err
			}
			if got == 0 {
				continue // the duration ran out
			}
			if err := completion(&rwcs[0], "a receive"); err != nil {
				return err
			}
			rcnt++
			if l.duration || rcnt+rx <= l.iters {
				if err := qp.PostRecv(recv); err != nil {
					return fmt.Errorf("perftest: reposting a receive: %w", err)
				}
			}
			if l.ph.sampling {
				l.sampled++
			}
		}
		if !(l.duration || scnt < l.iters) {
			continue
		}
		scnt++
		if err := l.post(ctx, &wr, scnt, "Send"); err != nil {
			return err
		}
	}
	return nil
}
