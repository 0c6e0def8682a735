package pmemsink

import (
	"errors"
	"fmt"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
)

// A group is the target state of one protection domain, which is one
// connection when each gets its own: a tracker per sink its registrations
// map, and the worker goroutine that runs the persists its flushes need,
// in the order they arrived.
type group struct {
	pd *conn.PD

	mu       sync.Mutex
	changed  *sync.Cond // a job was done, or the worker ended
	trackers []*groupTracker
	regs     int
	jobs     [jobRing]job
	head, n  int
	running  bool // the worker is running a job
	ended    bool // no registration left: the worker stops once idle
	wake     chan struct{}
}

// groupTracker is the group's tracker of one sink.
type groupTracker struct {
	s    *Sink
	tr   *Tracker
	regs []*Registration
}

// jobRing bounds the flushes waiting for the worker: conn holds at most
// IRD (at most 128) Read and Flush Requests per connection, and GPSPM
// requests are bounded by the receives the target posts. A full ring
// (several busy connections sharing one protection domain) refuses the
// flush with an error rather than block the receiver.
const jobRing = 256

type job struct {
	kind  flushKind
	r     *Registration
	off   uint64
	n     uint64
	ctx   uint64 // GPSPM op_context
	read  conn.ReadRelease
	flush conn.FlushRelease
	gpspm GPSPMResponder
	obsID int
}

var (
	errJobsFull = errors.New("pmemsink: too many flushes waiting for a persist on this protection domain")
	errEnded    = errors.New("pmemsink: flush for a registration that was closed")
)

// groups maps each protection domain with sink registrations to its group.
var groups struct {
	mu sync.Mutex
	m  map[*conn.PD]*group
}

// joinGroup adds r, a registration of s in pd, to pd's group, creating the
// group and the sink's tracker as needed.
func joinGroup(pd *conn.PD, s *Sink, r *Registration) (*group, *groupTracker, error) {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	g := groups.m[pd]
	if g == nil {
		g = &group{pd: pd, wake: make(chan struct{}, 1)}
		g.changed = sync.NewCond(&g.mu)
		if groups.m == nil {
			groups.m = make(map[*conn.PD]*group)
		}
		groups.m[pd] = g
		go g.work()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var gt *groupTracker
	for _, x := range g.trackers {
		if x.s == s {
			gt = x
		}
	}
	if gt == nil {
		gt = &groupTracker{s: s}
		tr, err := s.Attach(func() { go gt.stop() })
		if err != nil {
			if g.regs == 0 {
				g.endLocked()
				delete(groups.m, pd)
			}
			return nil, nil, err
		}
		gt.tr = tr
		g.trackers = append(g.trackers, gt)
	}
	gt.regs = append(gt.regs, r)
	g.regs++
	return g, gt, nil
}

// stop is the tracker's stop function, called when the sink closes: it
// asks each registration's connection to end and closes the registrations,
// which ends the peers' accesses and detaches the tracker.
func (gt *groupTracker) stop() {
	groups.mu.Lock()
	regs := append([]*Registration(nil), gt.regs...)
	groups.mu.Unlock()
	for _, r := range regs {
		if r.cfg.onStop != nil {
			r.cfg.onStop()
		}
		_ = r.Close()
	}
}

// leave removes r. It waits until the worker has run every job queued so
// far (their persists finish; an acknowledgement to a connection that has
// ended goes nowhere); the last registration of a sink detaches its
// tracker (persisting what is left), and the last of the group ends the
// worker.
func (g *group) leave(r *Registration, s *Sink) error {
	groups.mu.Lock()
	g.mu.Lock()
	var gt *groupTracker
	for _, x := range g.trackers {
		if x.s == s {
			gt = x
		}
	}
	if gt != nil {
		for i, x := range gt.regs {
			if x == r {
				gt.regs = append(gt.regs[:i], gt.regs[i+1:]...)
				g.regs--
				break
			}
		}
	}
	last := gt != nil && len(gt.regs) == 0
	if last {
		for i, x := range g.trackers {
			if x == gt {
				g.trackers = append(g.trackers[:i], g.trackers[i+1:]...)
				break
			}
		}
	}
	if g.regs == 0 {
		delete(groups.m, g.pd)
	}
	groups.mu.Unlock()
	for g.n > 0 || g.running {
		g.changed.Wait()
	}
	if g.regs == 0 {
		g.endLocked()
	}
	g.mu.Unlock()
	if last {
		return gt.tr.Detach()
	}
	return nil
}

// drain waits until the worker has run every job queued so far.
func (g *group) drain() {
	g.mu.Lock()
	for g.n > 0 || g.running {
		g.changed.Wait()
	}
	g.mu.Unlock()
}

func (g *group) endLocked() {
	if !g.ended {
		g.ended = true
		g.signal()
	}
}

// clean reports whether nothing the group's connection placed, in any
// sink, waits for a persist.
func (g *group) clean() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gt := range g.trackers {
		if !gt.tr.Clean() {
			return false
		}
	}
	return true
}

// push queues j for the worker. It never blocks; a full queue fails the
// flush at once. A sink whose persist does nothing (ModeVolatile) has
// nothing to wait for: if the worker is idle, the job runs here, in its
// turn, without the hand-off.
func (g *group) push(j job) {
	g.mu.Lock()
	if g.n == len(g.jobs) || g.ended {
		err := errJobsFull
		if g.ended {
			err = errEnded
		}
		g.mu.Unlock()
		j.fail(err)
		return
	}
	if j.r.s.kind == persistNone && g.n == 0 && !g.running {
		g.running = true
		g.mu.Unlock()
		if g.runClaimed(&j) {
			// Jobs queued meanwhile, or the group ended: the worker,
			// which saw this one running, must look again.
			g.signal()
		}
		return
	}
	g.jobs[(g.head+g.n)%len(g.jobs)] = j
	g.n++
	g.mu.Unlock()
	g.signal()
}

func (g *group) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// work runs the queued jobs in order, one at a time, until the group
// ends.
func (g *group) work() {
	for {
		g.mu.Lock()
		for g.n == 0 || g.running {
			if g.ended && g.n == 0 && !g.running {
				g.changed.Broadcast()
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			<-g.wake
			g.mu.Lock()
		}
		j := g.jobs[g.head]
		g.jobs[g.head] = job{}
		g.head = (g.head + 1) % len(g.jobs)
		g.n--
		g.running = true
		g.mu.Unlock()
		g.runClaimed(&j)
	}
}

// runClaimed runs j, for which the caller set running, and clears it. It
// reports whether the worker has something to do now: jobs are queued or
// the group has ended.
func (g *group) runClaimed(j *job) bool {
	g.run(j)
	g.mu.Lock()
	g.running = false
	g.changed.Broadcast()
	more := g.n > 0 || g.ended
	g.mu.Unlock()
	return more
}

// run persists what j needs, then acknowledges it (or fails it).
func (g *group) run(j *job) {
	r := j.r
	h := r.hooks()
	if h.ackEarly {
		// The defect the crash simulator must catch.
		j.ack()
		_ = g.persist(j)
		return
	}
	if err := g.persist(j); err != nil {
		j.fail(err)
		return
	}
	j.ack()
}

func (g *group) persist(j *job) error {
	r := j.r
	switch j.kind {
	case kindRead:
		// Everything the connection placed, in every sink.
		g.mu.Lock()
		var trs [4]*Tracker
		list := trs[:0]
		for _, gt := range g.trackers {
			list = append(list, gt.tr)
		}
		g.mu.Unlock()
		for _, tr := range list {
			if err := withPersistSlot(tr.s, tr.PersistAll); err != nil {
				return err
			}
		}
		return nil
	case kindFlush:
		return withPersistSlot(r.s, func() error { return r.gt.tr.PersistRange(j.off, j.n) })
	case kindGPSPM:
		if r.hooks().gpspmNoPersist {
			return nil
		}
		return withPersistSlot(r.s, func() error { return r.gt.tr.PersistSpan(j.off, j.n) })
	}
	return fmt.Errorf("pmemsink: unknown flush kind %d", j.kind)
}

// withPersistSlot runs a persist of s within the sink's bound on
// concurrent persists.
func withPersistSlot(s *Sink, f func() error) error {
	s.persistSlots <- struct{}{}
	defer func() { <-s.persistSlots }()
	return f()
}

// ack sends the acknowledgement of a job whose persist succeeded. A Flush
// Response says "persistent" only for a Durable sink.
func (j *job) ack() {
	j.r.observeAck(j.obsID)
	switch j.kind {
	case kindRead:
		j.read.Release(nil)
	case kindFlush:
		j.flush.Release(j.r.s.Durable(), nil)
	case kindGPSPM:
		j.gpspm(rpma.FlushResponse{OpContext: j.ctx}, nil)
	}
}

// fail reports a failed persist: never as a success.
func (j *job) fail(err error) {
	switch j.kind {
	case kindRead:
		j.read.Release(err)
	case kindFlush:
		j.flush.Release(false, err)
	case kindGPSPM:
		j.gpspm(rpma.FlushResponse{}, err)
	}
}
