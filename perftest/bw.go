package perftest

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
)

const pollBatch = 16 // CTX_POLL_BATCH

// bwClient is run_iter_bw: each queue pair keeps up to TX depth messages
// in flight, every CQ-moderation-th one signalled (and the last), walking
// the cycle buffer on both sides; a Send test also stays within the
// receiver's credits.
func (s *session) bwClient(ctx context.Context, size int) (BWReport, error) {
	st := s.s
	n := len(s.qps)
	iters := uint64(st.Iters)
	duration := st.Duration > 0
	if duration {
		iters = 1<<63 - 1
	}
	tot := iters * uint64(n)
	cycle, cl := s.proto.CycleBuffer(), s.proto.CacheLineSize()
	var t bwTimes
	t.noPeak = st.noPeak
	if !t.noPeak {
		t.posted = make([]int64, tot)
		t.completed = make([]int64, tot)
	}
	scnt := make([]uint64, n)
	ccnt := make([]uint64, n)
	wrs := make([]conn.SendWR, n)
	sges := make([]conn.SGE, n)
	op, what := conn.OpSend, "a Send"
	switch st.Test {
	case WriteBW:
		op, what = conn.OpWrite, "an RDMA Write"
	case ReadBW:
		op, what = conn.OpRead, "an RDMA Read"
	case AtomicBW:
		op, what = st.atomicOp()
	}
	remote := make([]conn.RemoteAddr, n)
	for i := range n {
		d := s.proto.PeerDest(i)
		remote[i] = conn.RemoteAddr{STag: stagOf(d.RKey), TO: d.VAddr}
		sges[i] = s.bufs.data[i].SGE(0, size)
		wrs[i] = conn.SendWR{ID: uint64(i), Op: op, SGL: sges[i : i+1], Atomic: st.atomicArgs()}
	}
	cqMod := uint64(st.cqMod)
	signaled := func(k uint64) bool { return k%cqMod == cqMod-1 || (!duration && k == iters-1) }
	wcs := make([]conn.WorkCompletion, pollBatch)
	var w waiter
	var totS, totC, sampled uint64
	start := now()
	ph := newPhases(st, start)
	t.start = start
	for {
		tn := now()
		over := ph.at(tn)
		if over || (!duration && totC >= tot) {
			break
		}
		posted := false
		held := -1 // a queue pair the receiver's credit holds back
		for i := range n {
			for !over && scnt[i] < iters && scnt[i]-ccnt[i]+1 <= uint64(st.txDepth) {
				if st.Test == SendBW && !windowOpen(scnt[i], loadCredit(s.bufs.credit, i*creditSlot), st.rxDepth) {
					held = i
					break
				}
				k := scnt[i]
				off := cycleOffset(k, size, cycle, cl)
				wr := &wrs[i]
				sges[i].Offset = off
				if op != conn.OpSend {
					wr.Remote = conn.RemoteAddr{STag: remote[i].STag, TO: remote[i].TO + uint64(off)}
				}
				wr.Flags = 0
				if signaled(k) {
					wr.Flags = conn.Signaled
				}
				if !t.noPeak {
					t.posted[totS] = now()
				}
				if err := s.qps[i].PostSend(*wr); err != nil {
					return BWReport{}, fmt.Errorf("%w: posting message %d: %w", ErrTest, k, err)
				}
				scnt[i]++
				totS++
				posted = true
			}
		}
		if posted && totC == totS {
			continue
		}
		deadline := int64(0)
		if ph.on {
			deadline = ph.next(now())
		}
		if held >= 0 && s.scq.Len() == 0 {
			// The credit holds a queue pair back, and the messages in
			// flight may be unsignalled ones that complete nothing:
			// watch the credit word and the completion queue at once,
			// as perftest's polling loop does.
			i := held
			ready := func() bool {
				return s.scq.Len() > 0 || windowOpen(scnt[i], loadCredit(s.bufs.credit, i*creditSlot), st.rxDepth)
			}
			if err := spin(ctx, s.qps[i], ready, deadline); err != nil {
				return BWReport{}, err
			}
			if s.scq.Len() == 0 {
				continue
			}
		}
		got, err := w.wait(ctx, s.scq, wcs, s.qps, deadline)
		if err != nil {
			return BWReport{}, err
		}
		tn = now()
		for _, wc := range wcs[:got] {
			if err := completion(&wc, what); err != nil {
				return BWReport{}, err
			}
			i := wc.ID
			// Completions come in order: this one covers the messages up
			// to the next signalled one.
			k := (ccnt[i]/cqMod+1)*cqMod - 1
			if !duration {
				k = min(k, iters-1)
			}
			done := k + 1 - ccnt[i]
			ccnt[i] = k + 1
			totC += done
			if !t.noPeak {
				t.completed[totC-1] = tn
			}
			if ph.sampling {
				sampled += done
			}
		}
	}
	t.end = now()
	if duration {
		return bwDurationResult(size, sampled, ph.window(), st.ReportGbits), nil
	}
	return bwResult(size, tot, &t, st.ReportGbits), nil
}

// postRecvs posts each queue pair's receives for size-byte messages: RX
// depth of them.
func (s *session) postRecvs(size int) error {
	for i, qp := range s.qps {
		mr := s.bufs.data[i]
		if s.s.Test == SendLat {
			mr = s.bufs.recv[i]
		}
		sgl := []conn.SGE{mr.SGE(0, size)}
		for range s.s.rxDepth {
			if err := qp.PostRecv(conn.RecvWR{ID: uint64(i), SGL: sgl}); err != nil {
				return fmt.Errorf("perftest: posting receives: %w", err)
			}
		}
	}
	return nil
}

// bwServer is run_iter_bw_server: count the client's Sends, repost
// receives until iters are posted, and write a credit after every
// rx_depth/3 of them.
func (s *session) bwServer(ctx context.Context, size int) (BWReport, error) {
	st := s.s
	n := len(s.qps)
	iters := uint64(st.Iters)
	duration := st.Duration > 0
	tot := iters * uint64(n)
	rcnt := make([]uint64, n)
	posted := make([]uint64, n)
	scredit := make([]int, n)
	seq := make([]uint64, n)
	for i := range posted {
		posted[i] = uint64(st.rxDepth)
	}
	recvs := make([]conn.RecvWR, n)
	credits := make([]conn.SendWR, n)
	sges := make([]conn.SGE, 2*n)
	for i := range n {
		sges[i] = s.bufs.data[i].SGE(0, size)
		recvs[i] = conn.RecvWR{ID: uint64(i), SGL: sges[i : i+1]}
		d := s.proto.PeerDest(i)
		sges[n+i] = s.bufs.credit.SGE(0, 4)
		credits[i] = conn.SendWR{ID: uint64(i), Op: conn.OpWrite, Flags: conn.Signaled, SGL: sges[n+i : n+i+1],
			Remote: conn.RemoteAddr{STag: stagOf(d.RKey), TO: d.VAddr}}
	}
	wcs := make([]conn.WorkCompletion, pollBatch)
	swcs := make([]conn.WorkCompletion, pollBatch)
	var w, sw waiter
	var total, sampled uint64
	var start int64
	var ph phases
	first := true
	credit := s.bufs.credit.Bytes()
	// reapCredits waits for at least one credit Write of the queue pairs.
	reapCredits := func() error {
		got, err := sw.wait(ctx, s.scq, swcs, s.qps, 0)
		if err != nil {
			return err
		}
		for _, wc := range swcs[:got] {
			if err := completion(&wc, "a credit Write"); err != nil {
				return err
			}
			scredit[wc.ID]--
		}
		return nil
	}
	for total < tot || duration {
		deadline := int64(0)
		if ph.on {
			if ph.at(now()) {
				break
			}
			deadline = ph.next(now())
		}
		got, err := w.wait(ctx, s.rcq, wcs, s.qps, deadline)
		if err != nil {
			return BWReport{}, err
		}
		if got > 0 && first {
			// set_on_first_rx_packet: the clock starts with the first
			// message.
			first = false
			start = now()
			ph = newPhases(st, start)
		}
		for _, wc := range wcs[:got] {
			if err := completion(&wc, "a receive"); err != nil {
				return BWReport{}, err
			}
			i := int(wc.ID)
			rcnt[i]++
			total++
			if ph.sampling {
				sampled++
			}
			if duration || posted[i]+1 <= iters {
				if err := s.qps[i].PostRecv(recvs[i]); err != nil {
					return BWReport{}, fmt.Errorf("perftest: reposting a receive: %w", err)
				}
				posted[i]++
			}
			if !creditDue(rcnt[i], st.rxDepth) {
				continue
			}
			for scredit[i] == st.txDepth {
				if err := reapCredits(); err != nil {
					return BWReport{}, err
				}
			}
			// Slot seq%txDepth last carried the credit txDepth Writes ago,
			// which has completed: fewer than txDepth are in flight.
			slot := (i*st.txDepth + int(seq[i]%uint64(st.txDepth))) * creditSlot
			binary.LittleEndian.PutUint32(credit[slot:], uint32(rcnt[i]))
			sges[n+i].Offset = slot
			seq[i]++
			if err := s.qps[i].PostSend(credits[i]); err != nil {
				return BWReport{}, fmt.Errorf("perftest: posting a credit: %w", err)
			}
			scredit[i]++
		}
	}
	end := now()
	// clean_scq_credit: every credit Write completes before the run ends.
	for {
		out := 0
		for _, c := range scredit {
			out += c
		}
		if out == 0 {
			break
		}
		if err := reapCredits(); err != nil {
			return BWReport{}, err
		}
	}
	if duration {
		return bwDurationResult(size, sampled, ph.window(), st.ReportGbits), nil
	}
	return bwResult(size, tot, &bwTimes{noPeak: true, start: start, end: end}, st.ReportGbits), nil
}
