package conn

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
)

// The soak: many connections at once through badNet proxies that
// misbehave in both directions, each connection with its own plan drawn
// from a seeded RNG, for a bounded time. Run a longer one with
//
//	go test ./conn -run Soak -v -soak=2m [-soak.pairs=64] [-soak.seed=N]
var (
	soakFor   = flag.Duration("soak", 0, "how long TestSoak_BadNet starts connections (0: 8s, 1.5s with -short)")
	soakPairs = flag.Int("soak.pairs", 0, "connections TestSoak_BadNet keeps open at once (0: 32, 8 with -short)")
	soakSeed  = flag.Uint64("soak.seed", 0, "seed of TestSoak_BadNet's plans (0: from the clock; the test logs it)")
)

// Sizes of the soak's regions. A connection whose proxy writes tiny
// pieces moves small messages, or it would spend the run in write calls.
const (
	soakMaxMsg    = 64 << 10
	soakSmallMsg  = 8 << 10
	soakRecvSlot  = 8 << 10
	soakRecvSlots = 4
	soakInSlots   = 2
)

// soakLeakUnit is the smallest per-connection leak the memory check must
// catch: a page, less than any buffer a connection allocates (the
// library's rings and reader buffer, the test's smallest region). The heap
// after the run may exceed the heap before it by at most half a unit per
// connection, so leaking one such buffer per connection fails the test.
const soakLeakUnit = 4 << 10

// soakRound is what one side does in one round: an RDMA Write of write
// bytes into the peer's current in-slot, a Send of send bytes, an RDMA
// Read of readLen bytes back from readOff of that slot, and (when RFC 7306
// was negotiated, as between iwarp-go peers it is) a FetchAdd on the
// peer's shared word.
type soakRound struct {
	write, send, readOff, readLen int
}

// soakPlan is one connection's configuration and workload.
type soakPlan struct {
	id     int
	seed   uint64
	crc    bool
	maxMsg int
	rounds [2][]soakRound // client's, server's
	modes  [2]waitMode
	up     faults
	down   faults
	idle   time.Duration
	client []Option
	server []Option
	desc   string
}

// waitMode is how a side collects its completions.
type waitMode uint8

const (
	modeWait    waitMode = iota // CQ.Wait (which may receive for the queue pair)
	modePoll                    // Poll and Ready
	modeHandler                 // a completion handler
)

func (m waitMode) String() string { return [...]string{"wait", "poll", "handler"}[m] }

// logUniform draws from [lo, hi], the logarithm uniform.
func logUniform(rng *rand.Rand, lo, hi int) int {
	v := int(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi+1))-math.Log(float64(lo)))))
	return min(max(v, lo), hi)
}

// makeSoakPlan draws connection id's plan: its options, its workload and
// its proxy's faults. A fault that must end the connection goes to three
// connections in eight (a bit flip only where CRC is on). stallMax bounds
// each stall.
func makeSoakPlan(seed uint64, id int, stallMax time.Duration) *soakPlan {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	p := &soakPlan{id: id, seed: seed, crc: rng.IntN(4) != 0, maxMsg: soakMaxMsg}
	var desc []string
	if p.crc {
		p.client = append(p.client, WithCRC(CRCRequired))
		desc = append(desc, "crc")
	} else {
		p.client = append(p.client, WithCRC(CRCOff))
		p.server = append(p.server, WithCRC(CRCOff))
		desc = append(desc, "no-crc")
	}
	switch rng.IntN(10) {
	case 0:
		p.client = append(p.client, WithMPARevision(1))
		desc = append(desc, "rev1")
	case 1:
		p.client = append(p.client, WithoutP2P())
		desc = append(desc, "no-p2p")
	default:
		rtr := [...]RTR{RTRWrite, RTRRead, RTRSend, RTRWrite | RTRRead | RTRSend}[rng.IntN(4)]
		p.client = append(p.client, WithP2P(rtr))
		p.server = append(p.server, WithP2P(rtr))
		desc = append(desc, fmt.Sprintf("rtr=%v", rtr))
	}
	if rng.IntN(6) == 0 {
		p.client = append(p.client, WithMarkers())
		desc = append(desc, "markers→client")
	}
	if rng.IntN(6) == 0 {
		p.server = append(p.server, WithMarkers())
		desc = append(desc, "markers→server")
	}
	for side, opts := range []*[]Option{&p.client, &p.server} {
		if rng.IntN(3) == 0 {
			n := minFPDU + rng.IntN(4000)
			*opts = append(*opts, WithMaxFPDU(n))
			desc = append(desc, fmt.Sprintf("fpdu[%d]=%d", side, n))
		}
	}
	p.up, p.down = newFaults(), newFaults()
	for _, f := range []*faults{&p.up, &p.down} {
		f.maxPiece = [...]int{64, 1500, 16 << 10, 64 << 10}[rng.IntN(4)]
		if f.maxPiece < 1500 {
			p.maxMsg = soakSmallMsg
		} else if rng.IntN(2) == 0 {
			f.delay = time.Duration(50+rng.IntN(950)) * time.Microsecond
		}
	}
	n := 2 + rng.IntN(15)
	for side := range p.rounds {
		p.modes[side] = waitMode(rng.IntN(3))
		for range n {
			var r soakRound
			r.write = logUniform(rng, 1, p.maxMsg)
			if rng.IntN(10) != 0 {
				r.send = logUniform(rng, 1, soakRecvSlot)
			}
			r.readLen = logUniform(rng, 1, r.write)
			r.readOff = rng.IntN(r.write - r.readLen + 1)
			p.rounds[side] = append(p.rounds[side], r)
		}
	}
	desc = append(desc, fmt.Sprintf("rounds=%d", n), fmt.Sprintf("wait=%v/%v", p.modes[0], p.modes[1]))
	// What each direction carries, roughly (headers included): the faults
	// fall inside it, or a little beyond (then they never fire).
	var est [2]int64 // up, down
	for side, rounds := range p.rounds {
		for _, r := range rounds {
			est[side] += int64(r.write+r.send) + 3*64
			est[1-side] += int64(r.readLen) + 64
		}
	}
	kind := rng.IntN(8) // 0–3: a fault that ends the connection; else none
	if kind == 3 && !p.crc {
		kind = 4 // a flipped bit without CRC is undetectable by design
	}
	dir := rng.IntN(2)
	f := [...]*faults{&p.up, &p.down}[dir]
	switch kind {
	case 0, 1, 2:
		f.cut = cutKind(kind)
		f.cutAt = rng.Int64N(est[dir] * 5 / 4)
		if rng.IntN(4) == 0 {
			f.cutAt = rng.Int64N(48) // in the MPA Request or Reply (32 bytes), or just after
		}
		desc = append(desc, fmt.Sprintf("%v@%d/%s", f.cut, f.cutAt, [...]string{"up", "down"}[dir]))
	case 3:
		f.flipAt = rng.Int64N(est[dir] * 5 / 4)
		// A flipped length bit can make the receiver wait for bytes that
		// never come; only a timeout ends that (RFC 5044 §7.1.2 rule 10).
		p.idle = 3 * time.Second
		p.client = append(p.client, WithIdleTimeout(p.idle))
		p.server = append(p.server, WithIdleTimeout(p.idle))
		stallMax = min(stallMax, p.idle/8)
		desc = append(desc, fmt.Sprintf("flip@%d/%s", f.flipAt, [...]string{"up", "down"}[dir]))
	}
	for d, f := range []*faults{&p.up, &p.down} {
		var at int64
		for range rng.IntN(3) {
			at += rng.Int64N(est[d]/2 + 1)
			f.stalls = append(f.stalls, stall{at: at, d: time.Duration(1 + rng.Int64N(int64(stallMax)))})
		}
		if len(f.stalls) > 0 {
			desc = append(desc, fmt.Sprintf("stalls/%s=%d", [...]string{"up", "down"}[d], len(f.stalls)))
		}
	}
	p.desc = strings.Join(desc, " ")
	return p
}

// soakKey names the bytes of one message: plan, side, round and what.
func soakKey(p *soakPlan, side, round int, what byte) uint64 {
	return p.seed*0x9E3779B97F4A7C15 ^ uint64(p.id)<<40 ^ uint64(side)<<36 ^ uint64(round)<<8 ^ uint64(what)
}

// fillKey fills b with the splitmix64 stream of key: no period a shifted
// or misplaced copy could hide in.
func fillKey(b []byte, key uint64) {
	x := key
	for i := 0; i < len(b); i += 8 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		for k := 0; k < 8 && i+k < len(b); k++ {
			b[i+k] = byte(z >> (8 * k))
		}
	}
}

// soakSide is one end of a soak connection and its workload.
type soakSide struct {
	p       *soakPlan
	me      int // 0 client, 1 server
	name    string
	pd      *PD
	cq      *CQ
	qp      *QP
	handled chan WorkCompletion // modeHandler
	out     *MR                 // Write source
	ssrc    *MR                 // Send source
	in      *MR                 // the peer's Writes land here, its Reads read here
	sink    *MR                 // Read sink
	rbuf    *MR                 // receive buffers
	peerIn  RemoteAddr
	word    *MR // the shared word the peer's FetchAdds target
	orig    *MR // a FetchAdd's original value lands here
	peerW   RemoteAddr
	scratch []byte
	wcs     []WorkCompletion

	outstanding map[uint64]bool // work requests posted and not completed
	ops         int             // this round's own work requests completed
	notes       int             // the peer's rounds verified
	verified    int64           // bytes compared and found right
	broken      error           // the first unsuccessful completion
	overflow    atomic.Bool     // the handler found handled full

	// The model of the peer's word: this side's FetchAdds run one a round
	// and are its only writer, so each must return the sum of those that
	// succeeded before it. unsure is the add of one that failed, which the
	// peer may or may not have carried out.
	atomics bool
	added   uint64
	adding  uint64 // the add of this round's FetchAdd
	unsure  uint64
	fadds   int // FetchAdds that succeeded
}

const soakRecvID = 1 << 32

func newSoakSide(dev *Device, p *soakPlan, me int) (*soakSide, error) {
	s := &soakSide{p: p, me: me, name: [...]string{"client", "server"}[me], pd: dev.NewPD(),
		scratch: make([]byte, p.maxMsg), wcs: make([]WorkCompletion, 8), outstanding: map[uint64]bool{}}
	var cqOpts []CQOption
	if p.modes[me] == modeHandler {
		s.handled = make(chan WorkCompletion, 32)
		cqOpts = append(cqOpts, WithCompletionHandler(func(wc *WorkCompletion) {
			select {
			case s.handled <- *wc:
			default: // cannot happen: the CQ holds no more (the handler must not block)
				s.overflow.Store(true)
			}
		}))
	}
	s.cq = NewCQ(32, cqOpts...)
	var err error
	if s.qp, err = s.pd.NewQP(s.cq, QPCaps{SendDepth: 8, RecvDepth: 8}); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		mr   **MR
		n    int
		acc  Access
		zero bool
	}{
		{&s.out, p.maxMsg, 0, false},
		{&s.ssrc, soakRecvSlot, 0, false},
		{&s.in, soakInSlots * p.maxMsg, LocalWrite | RemoteWrite | RemoteRead, me == 1},
		{&s.sink, p.maxMsg, LocalWrite, false},
		{&s.rbuf, soakRecvSlots * soakRecvSlot, LocalWrite, false},
		{&s.word, 8, LocalWrite | RemoteAtomic, false},
		{&s.orig, 8, LocalWrite, false},
	} {
		var opts []RegOption
		if r.zero {
			opts = append(opts, ZeroBased())
		}
		if *r.mr, err = s.pd.Register(make([]byte, r.n), r.acc, opts...); err != nil {
			return nil, err
		}
	}
	for slot := range soakRecvSlots {
		if err := s.postRecv(slot); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *soakSide) postRecv(slot int) error {
	id := uint64(soakRecvID + slot)
	err := s.qp.PostRecv(RecvWR{ID: id, SGL: []SGE{s.rbuf.SGE(slot*soakRecvSlot, soakRecvSlot)}})
	if err == nil {
		s.outstanding[id] = true
	}
	return err
}

// deregister gives the regions back; every one must be free by now.
func (s *soakSide) deregister() error {
	var errs []error
	for _, mr := range []*MR{s.out, s.ssrc, s.in, s.sink, s.rbuf, s.word, s.orig} {
		if mr != nil {
			errs = append(errs, mr.Deregister())
		}
	}
	return errors.Join(errs...)
}

// collect waits, at most hangLimit, for completions and handles them.
func (s *soakSide) collect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, hangLimit)
	defer cancel()
	var n int
	var err error
	switch s.p.modes[s.me] {
	case modeWait:
		n, err = s.cq.Wait(ctx, s.wcs)
	case modePoll:
		for n = s.cq.Poll(s.wcs); n == 0; n = s.cq.Poll(s.wcs) {
			select {
			case <-s.cq.Ready():
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
			break
		}
	case modeHandler:
		select {
		case s.wcs[0] = <-s.handled:
			n = 1
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if s.overflow.Load() {
		return fmt.Errorf("%s: a completion was lost: the handler's channel was full", s.name)
	}
	if err != nil {
		return fmt.Errorf("%s: no completion within %v (%d work requests outstanding, %d notes verified, QP error %v): %w",
			s.name, hangLimit, len(s.outstanding), s.notes, s.qp.Err(), err)
	}
	for i := range s.wcs[:n] {
		if err := s.handle(&s.wcs[i]); err != nil {
			return err
		}
	}
	return nil
}

// handle checks one completion: a successful one must carry exactly the
// bytes that were sent.
func (s *soakSide) handle(wc *WorkCompletion) error {
	if !s.outstanding[wc.ID] {
		return fmt.Errorf("%s: completion of work request %d, which is not outstanding (%v)", s.name, wc.ID, wc.Status)
	}
	delete(s.outstanding, wc.ID)
	if err := wc.Err(); err != nil {
		if s.broken == nil {
			s.broken = err
		}
		if wc.ID < soakRecvID && wc.ID%4 == 3 {
			s.unsure = s.adding
		}
		return nil
	}
	if wc.ID >= soakRecvID {
		return s.verifyNote(wc)
	}
	round, op := int(wc.ID/4), int(wc.ID%4)
	s.ops++
	if op == 2 { // the Read: the bytes of this side's own Write
		r := s.p.rounds[s.me][round]
		want := s.scratch[:r.write]
		fillKey(want, soakKey(s.p, s.me, round, 'w'))
		if got := s.sink.Bytes()[:r.readLen]; !bytes.Equal(got, want[r.readOff:r.readOff+r.readLen]) {
			return fmt.Errorf("%s: round %d: RDMA Read succeeded with wrong bytes (first difference at %d of %d)",
				s.name, round, firstDiff(got, want[r.readOff:]), r.readLen)
		}
		s.verified += int64(r.readLen)
	}
	if op == 3 { // the FetchAdd: the sum of this side's adds before it
		if got := s.orig.LoadUint64(0); got != s.added {
			return fmt.Errorf("%s: round %d: FetchAdd returned %#x, the model says %#x", s.name, round, got, s.added)
		}
		s.added += s.adding
		s.fadds++
	}
	return nil
}

// soakAdd is the add of a side's FetchAdd in a round: odd, so that a lost
// or repeated add always shows in the sum.
func soakAdd(p *soakPlan, side, round int) uint64 { return soakKey(p, side, round, 'a') | 1 }

// checkWord checks the word s's peer added to against the peer's model:
// every add that completed, and perhaps the one that failed.
func (s *soakSide) checkWord(peer *soakSide) error {
	got := s.word.LoadUint64(0)
	if got == peer.added || (peer.unsure != 0 && got == peer.added+peer.unsure) {
		return nil
	}
	return fmt.Errorf("%s: shared word %#x after %d FetchAdds of the peer; the model says %#x (one in doubt: %#x)",
		s.name, got, peer.fadds, peer.added, peer.unsure)
}

// verifyNote checks the peer's round s.notes: the Send's bytes in the
// receive buffer and, now visible (the Send came after it), its Write's
// bytes in the in-slot.
func (s *soakSide) verifyNote(wc *WorkCompletion) error {
	peer := 1 - s.me
	round := s.notes
	if round >= len(s.p.rounds[peer]) {
		return fmt.Errorf("%s: a Send beyond the peer's %d rounds", s.name, round)
	}
	r := s.p.rounds[peer][round]
	if int(wc.ByteLen) != r.send {
		return fmt.Errorf("%s: round %d: received %d bytes, the peer sent %d", s.name, round, wc.ByteLen, r.send)
	}
	slot := int(wc.ID - soakRecvID)
	want := s.scratch[:r.send]
	fillKey(want, soakKey(s.p, peer, round, 's'))
	if got := s.rbuf.Bytes()[slot*soakRecvSlot:][:r.send]; !bytes.Equal(got, want) {
		return fmt.Errorf("%s: round %d: Send received with wrong bytes (first difference at %d of %d)", s.name, round, firstDiff(got, want), r.send)
	}
	want = s.scratch[:r.write]
	fillKey(want, soakKey(s.p, peer, round, 'w'))
	if got := s.in.Bytes()[round%soakInSlots*s.p.maxMsg:][:r.write]; !bytes.Equal(got, want) {
		return fmt.Errorf("%s: round %d: RDMA Write placed wrong bytes (first difference at %d of %d)", s.name, round, firstDiff(got, want), r.write)
	}
	s.verified += int64(r.send + r.write)
	s.notes++
	if err := s.postRecv(slot); err != nil && s.broken == nil {
		s.broken = err
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// run is the side's workload. Round r starts once the peer's rounds
// before r are verified. The peer's Write r+1 lands in the in-slot of its
// round r-1 (soakInSlots = 2), and the peer posts it only after this
// side's Send r, which comes after this side has checked that slot; and
// no more than two of the peer's Sends are ever unverified, so the
// receives are always reposted in time. run returns an error only for
// what fails the test; a connection that broke sets broken.
func (s *soakSide) run(ctx context.Context) error {
	rounds := s.p.rounds[s.me]
	for round, r := range rounds {
		for s.notes < round && s.broken == nil {
			if err := s.collect(ctx); err != nil {
				return err
			}
		}
		if s.broken != nil {
			break
		}
		fillKey(s.out.Bytes()[:r.write], soakKey(s.p, s.me, round, 'w'))
		fillKey(s.ssrc.Bytes()[:r.send], soakKey(s.p, s.me, round, 's'))
		slot := s.peerIn
		slot.TO += uint64(round % soakInSlots * s.p.maxMsg)
		read := slot
		read.TO += uint64(r.readOff)
		var send []SGE
		if r.send > 0 {
			send = []SGE{s.ssrc.SGE(0, r.send)}
		}
		wrs := []SendWR{
			{ID: uint64(4 * round), Op: OpWrite, Flags: Signaled, SGL: []SGE{s.out.SGE(0, r.write)}, Remote: slot},
			{ID: uint64(4*round + 1), Op: OpSend, Flags: Signaled, SGL: send},
			{ID: uint64(4*round + 2), Op: OpRead, Flags: Signaled, SGL: []SGE{s.sink.SGE(0, r.readLen)}, Remote: read},
		}
		if s.atomics {
			s.adding = soakAdd(s.p, s.me, round)
			wrs = append(wrs, SendWR{ID: uint64(4*round + 3), Op: OpFetchAdd, Flags: Signaled,
				SGL: []SGE{s.orig.SGE(0, 8)}, Remote: s.peerW, Atomic: FetchAdd(s.adding)})
		}
		s.ops = 0
		n, err := s.qp.PostSendBatch(wrs)
		for _, wr := range wrs[:n] {
			s.outstanding[wr.ID] = true
		}
		if err != nil {
			if !errors.Is(err, ErrQPClosed) {
				return fmt.Errorf("%s: round %d: posting: %w", s.name, round, err)
			}
			s.broken = err
			break
		}
		for s.ops < len(wrs) && s.broken == nil {
			if err := s.collect(ctx); err != nil {
				return err
			}
		}
	}
	for s.notes < len(s.p.rounds[1-s.me]) && s.broken == nil {
		if err := s.collect(ctx); err != nil {
			return err
		}
	}
	if s.broken != nil {
		return s.drain(ctx)
	}
	return nil
}

// drain waits until every work request posted has completed.
func (s *soakSide) drain(ctx context.Context) error {
	for len(s.outstanding) > 0 {
		if err := s.collect(ctx); err != nil {
			return err
		}
	}
	return nil
}

// soakTally adds up what the soak did.
type soakTally struct {
	mu                  sync.Mutex
	conns, clean, setup int
	broken              int
	verified            int64
	fetchAdds           int
	faults              map[string]int64
	ends                map[string]int
}

func (t *soakTally) add(b *badNet, sides [2]*soakSide, setupFailed bool, ends []error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns++
	switch {
	case setupFailed:
		t.setup++
	case b.stats.fatal():
		t.broken++
	default:
		t.clean++
	}
	for _, s := range sides {
		if s != nil {
			t.verified += s.verified
			t.fetchAdds += s.fadds
		}
	}
	st := &b.stats
	for k, v := range map[string]int64{
		"re-chunked pieces": st.pieces.Load(), "coalesced reads": st.coalesced.Load(),
		"delays": st.delays.Load(), "stalls": st.stalls.Load(), "bit flips (CRC on)": st.flips.Load(),
		"FIN cuts": st.cuts[cutClose].Load(), "resets": st.cuts[cutReset].Load(),
		"half-closes": st.cuts[cutHalf].Load(), "cuts during setup": st.cutsInSetup.Load(),
	} {
		t.faults[k] += v
	}
	for _, err := range ends {
		t.ends[endClass(err)]++
	}
}

// endClass names how a queue pair ended, for the log.
func endClass(err error) string {
	var te *rdmap.TerminateError
	switch {
	case err == nil:
		return "no error"
	case errors.As(err, &te):
		side := "sent"
		if te.Remote {
			side = "received"
		}
		return fmt.Sprintf("Terminate %s: %v", side, te.Code)
	case errors.Is(err, ErrIdleTimeout):
		return "idle timeout"
	case errors.Is(err, ErrPeerClosed):
		return "peer closed"
	case errors.Is(err, ErrConnectionLost):
		return "connection lost"
	case errors.Is(err, ErrQPClosed):
		return "closed"
	}
	return "other: " + err.Error()
}

// soakConn runs one connection of the soak from plan to teardown, and
// returns what fails the test.
func soakConn(ctx context.Context, dev *Device, p *soakPlan, tally *soakTally) (err error) {
	var sides [2]*soakSide
	defer func() {
		for _, s := range sides {
			if s != nil {
				s.qp.Abort() // ended already, unless the test failed
				if derr := s.deregister(); derr != nil && err == nil {
					err = fmt.Errorf("%s: deregistering after the end: %w", s.name, derr)
				}
			}
		}
		if err != nil {
			err = fmt.Errorf("connection %d (seed %d; %s): %w", p.id, p.seed, p.desc, err)
		}
	}()
	for me := range sides {
		if sides[me], err = newSoakSide(dev, p, me); err != nil {
			return err
		}
	}
	client, server := sides[0], sides[1]
	client.peerIn, server.peerIn = server.in.Remote(0), client.in.Remote(0)
	client.peerW, server.peerW = server.word.Remote(0), client.word.Remote(0)

	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", p.server...)
	if err != nil {
		return err
	}
	defer ln.Close()
	bn := &badNet{up: p.up, down: p.down}
	if err := bn.start(ln.Addr().String(), p.seed^uint64(p.id)); err != nil {
		return err
	}
	defer bn.close()

	// Setup. A fault may end it: then Connect, Accept, or both fail.
	setupCtx, cancelSetup := context.WithTimeout(ctx, hangLimit)
	defer cancelSetup()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(setupCtx, server.qp) }()
	cerr := client.qp.Connect(setupCtx, "tcp", bn.addr(), p.client...)
	if cerr != nil {
		cancelSetup() // no request may ever reach the listener
	}
	serr := <-accepted
	if errors.Is(serr, context.Canceled) && cerr != nil {
		server.qp.Close() // never connected: its receives flush
	}
	if errors.Is(cerr, context.DeadlineExceeded) || errors.Is(serr, context.DeadlineExceeded) {
		return fmt.Errorf("setup did not end within %v: client %v, server %v", hangLimit, cerr, serr)
	}
	setupFailed := cerr != nil || serr != nil
	if setupFailed && !bn.stats.fatal() {
		return fmt.Errorf("setup failed with no fault: client %v, server %v", cerr, serr)
	}
	if !setupFailed {
		for _, s := range sides {
			if n := s.qp.Negotiated(); n != nil && n.CRC != p.crc {
				return fmt.Errorf("%s: CRC %v negotiated, the plan says %v", s.name, n.CRC, p.crc)
			}
			// Every iwarp-go peer declares RFC 7306, whatever the MPA
			// revision or RTR.
			if s.atomics = s.qp.PeerAtomics(); !s.atomics {
				return fmt.Errorf("%s: RFC 7306 not negotiated between iwarp-go peers", s.name)
			}
		}
	}

	var wg sync.WaitGroup
	var runErr [2]error
	if !setupFailed {
		for i, s := range sides {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runErr[i] = s.run(ctx)
			}()
		}
		wg.Wait()
		if err := errors.Join(runErr[:]...); err != nil {
			return err
		}
	}
	fatal := bn.stats.fatal()
	broken := client.broken != nil || server.broken != nil || setupFailed
	switch {
	case broken && !fatal:
		return fmt.Errorf("the connection broke with no fault: client %v, server %v", client.broken, server.broken)
	case !broken && fatal:
		return fmt.Errorf("a fault took effect (%s) yet every round completed", faultSummary(&bn.stats))
	}
	var ends []error
	if broken {
		// Both ends learn it, whatever the fault: Done fires and Err says
		// why, without this side closing anything.
		var end [2]error // nil: setup failed on that side
		for i, s := range sides {
			if s.qp.Negotiated() == nil {
				continue // setup failed here: nothing to end
			}
			select {
			case <-s.qp.Done():
			case <-time.After(hangLimit):
				return fmt.Errorf("%s: still connected %v after the fault (%v)", s.name, hangLimit, faultSummary(&bn.stats))
			}
			e := s.qp.Err()
			if e == nil || errors.Is(e, ErrQPClosed) {
				return fmt.Errorf("%s: ended by a fault with error %v", s.name, e)
			}
			end[i] = e
			ends = append(ends, e)
		}
		// With CRC an FPDU is verified before any of it is acted on (RFC
		// 5044 §6), markers or not: a flipped bit can only be a CRC error,
		// never a header or marker error that the damage made up.
		if p.crc && bn.stats.flips.Load() > 0 {
			for i, e := range end {
				var te *rdmap.TerminateError
				if errors.As(e, &te) && !te.Remote && te.Code != rdmap.CRCError.Code() {
					return fmt.Errorf("%s: a flipped bit was acted on before its CRC was checked: %v", sides[i].name, e)
				}
			}
		}
		// A Terminate received is the one the peer's queue pair sent when
		// it ended (no setup failure between two iwarp-go peers of the
		// same plan calls for one).
		for i := range end {
			var got, sent *rdmap.TerminateError
			if errors.As(end[i], &got) && got.Remote {
				if !errors.As(end[1-i], &sent) || sent.Remote || sent.Code != got.Code {
					peer := end[1-i]
					if peer == nil {
						peer = [...]error{cerr, serr}[1-i]
					}
					return fmt.Errorf("%s received a Terminate (%v) its peer did not send (the peer ended with: %v)", sides[i].name, got.Code, peer)
				}
			}
		}
	}
	for _, s := range sides {
		returned := make(chan struct{})
		go func() { s.qp.Close(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(hangLimit):
			return fmt.Errorf("%s: Close did not return within %v", s.name, hangLimit)
		}
		if !broken {
			e := s.qp.Err()
			if !errors.Is(e, ErrQPClosed) && !errors.Is(e, ErrPeerClosed) {
				return fmt.Errorf("%s: a clean connection ended with %v", s.name, e)
			}
			ends = append(ends, e)
		}
		// Every work request completes, flushed if not done.
		if err := s.drain(ctx); err != nil {
			return err
		}
	}
	// Both queue pairs have stopped: the words are the peers' to read.
	for i, s := range sides {
		if err := s.checkWord(sides[1-i]); err != nil {
			return err
		}
	}
	tally.add(bn, sides, setupFailed, ends)
	return nil
}

func faultSummary(s *faultStats) string {
	return fmt.Sprintf("flips %d, FIN cuts %d, resets %d, half-closes %d", s.flips.Load(),
		s.cuts[cutClose].Load(), s.cuts[cutReset].Load(), s.cuts[cutHalf].Load())
}

// liveHeap is the heap held by live objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestSoak_BadNet runs connections through misbehaving proxies for a
// bounded time (see soakFor). Each connection's proxy re-chunks both
// directions and, as its plan says, delays, stalls a direction, flips a bit
// (CRC connections only), or ends the stream with a FIN, a reset or a
// half-close at a random byte; both ends post RDMA Writes, Sends and RDMA
// Reads whose bytes are checked on every successful completion, and
// FetchAdds on a word of the peer whose original values, and the word at
// the end, are checked against a model of the adds. A
// connection a fault hit must end at both queue pairs with an error and
// every work request completed (flushed); one no fault hit must complete
// every round. No goroutine and no heap is left over at the end.
func TestSoak_BadNet(t *testing.T) {
	checkLeaks(t)
	dur, pairs, stallMax, minMeasured := 8*time.Second, 32, 400*time.Millisecond, 256
	if testing.Short() {
		dur, pairs, stallMax, minMeasured = 1500*time.Millisecond, 8, 100*time.Millisecond, 64
	}
	if *soakFor > 0 {
		dur = *soakFor
	}
	if *soakPairs > 0 {
		pairs = *soakPairs
	}
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-soak.seed=%d repeats the plans), %d connections at once for %v", seed, seed, pairs, dur)
	dev, err := NewDevice()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	tally := &soakTally{faults: map[string]int64{}, ends: map[string]int{}}
	var failures []error
	var fmu sync.Mutex
	var next atomic.Int64
	// run keeps slots connections going until end, and until at least
	// atLeast connections have run.
	run := func(end time.Time, slots, atLeast int) {
		var wg sync.WaitGroup
		var started atomic.Int64
		for range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) || started.Add(1) <= int64(atLeast) {
					p := makeSoakPlan(seed, int(next.Add(1)), stallMax)
					if err := soakConn(ctx, dev, p, tally); err != nil {
						fmu.Lock()
						failures = append(failures, err)
						fmu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	// A first round of connections warms up what lives as long as the
	// process (pools, the device's tables); growth is measured after it.
	run(time.Now(), pairs, pairs)
	warm := tally.conns
	heapBefore, goroutinesBefore := liveHeap(), runtime.NumGoroutine()
	// Enough connections that the leak tolerance (below) stands well
	// above what the runtime itself keeps after a run (~50 KB: the
	// descriptors of exited goroutines, kept for reuse, and the like).
	run(time.Now().Add(dur), pairs, minMeasured)
	for _, err := range failures[:min(len(failures), 5)] {
		t.Error(err)
	}
	if len(failures) > 0 {
		t.FailNow()
	}

	deadline := time.Now().Add(hangLimit)
	for runtime.NumGoroutine() > goroutinesBefore && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutinesBefore {
		t.Errorf("%d goroutines after the soak, %d before", n, goroutinesBefore)
	}
	measured := tally.conns - warm
	heapAfter := liveHeap()
	tolerance := int64(measured) * soakLeakUnit / 2
	growth := int64(heapAfter) - int64(heapBefore)
	t.Logf("live heap %d bytes before, %d after %d connections: %+d (%.0f bytes per connection; tolerance %d, half a %d-byte buffer per connection)",
		heapBefore, heapAfter, measured, growth, float64(growth)/float64(max(measured, 1)), tolerance, soakLeakUnit)
	if growth > tolerance {
		t.Errorf("the heap grew by %d bytes over %d connections (tolerance %d)", growth, measured, tolerance)
	}

	t.Logf("connections: %d (%d no fault hit, all rounds verified; %d ended by a fault after setup; %d by a fault during setup)",
		tally.conns, tally.clean, tally.broken, tally.setup)
	t.Logf("bytes verified on successful completions: %d; FetchAdds checked against the model: %d", tally.verified, tally.fetchAdds)
	var kinds []string
	for k := range tally.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("  fault %-20s %d", k, tally.faults[k])
	}
	kinds = kinds[:0]
	for k := range tally.ends {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("  queue pairs ended: %-40s %d", k, tally.ends[k])
	}
	if tally.fetchAdds == 0 {
		t.Error("no FetchAdd succeeded")
	}
	if tally.broken+tally.setup == 0 || tally.clean == 0 {
		t.Errorf("the soak needs connections both with and without faults: %d clean, %d broken", tally.clean, tally.broken+tally.setup)
	}
}
