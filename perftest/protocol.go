package perftest

import (
	"fmt"
)

// StepKind says what a Protocol step asks of the program driving it.
type StepKind uint8

const (
	// StepExchange: send Msg on the comm connection and pass the peer's
	// message to Reply. The client sends first and then receives; the
	// server receives first and then sends.
	StepExchange StepKind = iota + 1
	// StepConnect: open (client) or accept (server) QPs test connections
	// on the comm connection's port, then call Done.
	StepConnect
	// StepPostRecv: post the test's receives for messages of Size bytes
	// (Send tests), then call Done. The exchange that follows tells the
	// peer they are posted.
	StepPostRecv
	// StepRun: run the measurement with messages of Size bytes, then call
	// Done. A bandwidth client gives its result to SetReport before the
	// report exchange.
	StepRun
	// StepEnd: the conversation is over; close the connections.
	StepEnd
)

func (k StepKind) String() string {
	switch k {
	case StepExchange:
		return "exchange"
	case StepConnect:
		return "connect"
	case StepPostRecv:
		return "post receives"
	case StepRun:
		return "run"
	case StepEnd:
		return "end"
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// Step is the next thing a Protocol needs done.
type Step struct {
	Kind StepKind
	// What names the exchanged item ("version", "handshake", …).
	What string
	// Msg is the message to send (StepExchange). It is valid until the
	// next call on the Protocol.
	Msg []byte
	// Size is the message size of a StepRun or StepPostRecv.
	Size int
	// QPs is the number of test connections of a StepConnect.
	QPs int
	// PeerDestsKnown marks the first step after the handshakes that
	// carry both sides' dests: perftest prints the queue pairs and the
	// table's column names here.
	PeerDestsKnown bool
}

// MaxMessage is the largest message a peer of any supported version sends
// on the comm connection; a receive of this size takes every one.
const MaxMessage = 512

// Params describe this side of a run to NewProtocol.
type Params struct {
	Test Test
	Role Role
	// QPs is the number of test connections (perftest's -q; default 1).
	QPs int
	// Size is the message size (-s); with AllSizes (-a) every power of
	// two from 2 bytes to 8 MiB is measured in turn instead.
	Size     int
	AllSizes bool
	// CycleBuffer and CacheLineSize are this side's page size and cache
	// line size (perftest exchanges them and both sides use the larger).
	CycleBuffer   int
	CacheLineSize int
	// MTU is this side's enum ibv_mtu value (3 for 1024 bytes).
	MTU int
}

// Protocol is the conversation of one perftest run on its comm connection:
// a small state machine that says what to send and what to do next, and
// checks what the peer sends. It does no I/O.
//
// The conversation is perftest 6.06's (Debian 12's perftest 4.5+0.17), and
// this side announces version 6.06 whatever the peer's. Peers of 6.28 and
// later then skip their parameter negotiation, which they gate on the
// remote version; the one thing that depends on the peer's own version is
// the size of its handshake message (56 bytes, or 64 from 6.29), which
// this side matches.
type Protocol struct {
	p     Params
	steps []step
	pos   int
	buf   []byte

	peerVersion Version
	cycleBuffer int
	cacheLine   int
	mtu         int

	my         []Dest
	peer       []Dest
	myReport   BWReport
	peerReport BWReport
}

type stepOp uint8

const (
	opVersion stepOp = iota + 1
	opCycleBuffer
	opCacheLine
	opMTU
	opSyncZero // a handshake before this side's dests exist: all zero
	opSync     // a handshake with dest qp
	opConnect
	opPostRecv
	opRun
	opReport // one item of the bandwidth report
	opEnd
)

type step struct {
	op    stepOp
	ready bool // the first step after the dest handshakes
	qp    int  // opSync
	size  int  // opRun, opPostRecv
	item  int  // opReport
}

// MaxSize is the largest message size of perftest's -a (MAX_SIZE).
const MaxSize = 1 << 23

// sizesOf returns the message sizes of a run.
func sizesOf(size int, all bool) []int {
	if !all {
		return []int{size}
	}
	var s []int
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}

// NewProtocol starts the conversation of p's side.
func NewProtocol(p Params) (*Protocol, error) {
	if !p.Test.valid() {
		return nil, fmt.Errorf("%w: test %v", ErrConfig, p.Test)
	}
	if p.Role != Client && p.Role != Server {
		return nil, fmt.Errorf("%w: role %v", ErrConfig, p.Role)
	}
	if p.QPs == 0 {
		p.QPs = 1
	}
	if p.QPs < 1 || p.QPs > MaxQPs || (p.QPs > 1 && p.Test.Latency()) {
		return nil, fmt.Errorf("%w: %d queue pairs (1 to %d, and only 1 in latency tests)", ErrConfig, p.QPs, MaxQPs)
	}
	if !p.AllSizes && (p.Size < 1 || p.Size > MaxMessageSize) {
		return nil, fmt.Errorf("%w: message size %d (1 to %d)", ErrConfig, p.Size, MaxMessageSize)
	}
	if p.CycleBuffer < 1 || p.CycleBuffer > maxCycleBuffer || p.CacheLineSize < 1 || p.CacheLineSize > maxCacheLineSize {
		return nil, fmt.Errorf("%w: cycle buffer %d, cache line %d", ErrConfig, p.CycleBuffer, p.CacheLineSize)
	}
	if !validMTU(p.MTU) {
		return nil, fmt.Errorf("%w: MTU %d", ErrConfig, p.MTU)
	}
	pr := &Protocol{
		p:           p,
		steps:       script(p.Test, p.Role, p.QPs, sizesOf(p.Size, p.AllSizes), p.AllSizes),
		buf:         make([]byte, 0, MaxMessage),
		cycleBuffer: p.CycleBuffer,
		cacheLine:   p.CacheLineSize,
		mtu:         p.MTU,
		my:          make([]Dest, p.QPs),
		peer:        make([]Dest, p.QPs),
	}
	return pr, nil
}

// MaxQPs bounds perftest's -q here (perftest allows 16384).
const MaxQPs = 64

// MaxMessageSize bounds perftest's -s here (perftest allows 2 GiB).
const MaxMessageSize = 1 << 30

// script lays out perftest 6.06's comm conversation for one test and role
// (the main functions of src/{write,read,send}_{bw,lat}.c with rdma_cm).
// docs/perftest.md has the same sequences as tables.
func script(t Test, r Role, qps int, sizes []int, all bool) []step {
	s := []step{{op: opVersion}, {op: opCycleBuffer}, {op: opCacheLine}, {op: opMTU},
		// create_rdma_cm_connection: a handshake, the test connections,
		// a handshake. The server listens for them only after the first.
		{op: opSyncZero}, {op: opConnect}, {op: opSyncZero}}
	one := step{op: opSync}
	rounds, ready := 0, 0
	dests := func() {
		for i := range qps {
			s = append(s, step{op: opSync, qp: i})
		}
		if rounds++; rounds == 2 {
			ready = len(s)
		}
	}
	runs := func() {
		for _, z := range sizes {
			s = append(s, step{op: opRun, size: z})
		}
	}
	switch t {
	case WriteBW, ReadBW, AtomicBW:
		// The dests, the dests again after printing them, and the
		// "additional handshake after RTR". Only the client runs; the
		// server waits in the handshake that follows the test.
		dests()
		dests()
		s = append(s, one)
		if r == Client {
			runs()
		}
		s = append(s, one)
		for i := range reportItems {
			s = append(s, step{op: opReport, item: i})
		}
		s = append(s, one) // ctx_close_connection
	case SendBW:
		dests()
		s = append(s, one)
		dests()
		for _, z := range sizes {
			if r == Server {
				s = append(s, step{op: opPostRecv, size: z})
			}
			s = append(s, one, step{op: opRun, size: z})
			if all {
				s = append(s, one)
			}
		}
		s = append(s, one) // ctx_close_connection
	case WriteLat:
		s = append(s, one)
		dests()
		dests()
		s = append(s, one)
		runs() // no closing handshake
	case ReadLat, AtomicLat:
		s = append(s, one)
		dests()
		dests()
		s = append(s, one)
		if r == Client {
			runs()
		}
		s = append(s, one) // ctx_close_connection
	case SendLat:
		dests()
		s = append(s, one)
		dests()
		for _, z := range sizes {
			s = append(s, step{op: opPostRecv, size: z}, one, step{op: opRun, size: z})
		}
		s = append(s, one) // ctx_close_connection
	}
	s = append(s, step{op: opEnd})
	s[ready].ready = true
	return s
}

// Next returns the current step. It does not advance: Reply (for an
// exchange) or Done (for the other kinds) does.
func (p *Protocol) Next() Step {
	st := p.steps[p.pos]
	s := p.next(st)
	s.PeerDestsKnown = st.ready
	return s
}

func (p *Protocol) next(st step) Step {
	b := p.buf[:0]
	switch st.op {
	case opVersion:
		return Step{Kind: StepExchange, What: "version", Msg: AppendVersion(b, OwnVersion)}
	case opCycleBuffer:
		return Step{Kind: StepExchange, What: "cycle buffer", Msg: appendInt32(b, int32(p.p.CycleBuffer))}
	case opCacheLine:
		return Step{Kind: StepExchange, What: "cache line size", Msg: appendInt32(b, int32(p.p.CacheLineSize))}
	case opMTU:
		return Step{Kind: StepExchange, What: "MTU", Msg: appendMTU(b, p.p.MTU)}
	case opSyncZero:
		return Step{Kind: StepExchange, What: "handshake", Msg: AppendDest(b, &Dest{}, p.peerVersion)}
	case opSync:
		return Step{Kind: StepExchange, What: "handshake", Msg: AppendDest(b, &p.my[st.qp], p.peerVersion)}
	case opReport:
		return Step{Kind: StepExchange, What: reportItemNames[st.item], Msg: p.myReport.appendItem(b, st.item)}
	case opConnect:
		return Step{Kind: StepConnect, QPs: p.p.QPs}
	case opPostRecv:
		return Step{Kind: StepPostRecv, Size: st.size}
	case opRun:
		return Step{Kind: StepRun, Size: st.size}
	}
	return Step{Kind: StepEnd}
}

// Reply takes the peer's message for the current exchange and advances.
// On error the step stays current and the run should end.
func (p *Protocol) Reply(msg []byte) error {
	st := p.steps[p.pos]
	switch st.op {
	case opVersion:
		v, err := ParseVersion(msg)
		if err != nil {
			return err
		}
		if err := checkPeerVersion(v); err != nil {
			return err
		}
		p.peerVersion = v
	case opCycleBuffer:
		v, err := parseSysData("cycle buffer", msg, maxCycleBuffer)
		if err != nil {
			return err
		}
		p.cycleBuffer = max(p.cycleBuffer, v)
	case opCacheLine:
		v, err := parseSysData("cache line size", msg, maxCacheLineSize)
		if err != nil {
			return err
		}
		p.cacheLine = max(p.cacheLine, v)
	case opMTU:
		v, err := parseMTU(msg)
		if err != nil {
			return err
		}
		if validMTU(v) && v < p.mtu {
			p.mtu = v
		}
	case opSyncZero, opSync:
		d, err := ParseDest(msg, p.peerVersion)
		if err != nil {
			return err
		}
		if st.op == opSync {
			p.peer[st.qp] = d
		}
	case opReport:
		if err := p.peerReport.setItem(st.item, msg); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: Reply at a %v step", ErrProtocol, p.Next().Kind)
	}
	p.pos++
	return nil
}

// Done finishes the current local step (connect, post receives, run).
func (p *Protocol) Done() error {
	switch p.steps[p.pos].op {
	case opConnect, opPostRecv, opRun:
		p.pos++
		return nil
	}
	return fmt.Errorf("%w: Done at a %v step", ErrProtocol, p.Next().Kind)
}

// SetDest sets this side's handshake data for test connection i. Call it
// after StepConnect; the handshakes before that send zeros, as perftest's
// do.
func (p *Protocol) SetDest(i int, d Dest) { p.my[i] = d }

// SetReport sets the bandwidth report this side sends. A bandwidth client
// sets its result; a server's report is not used by its peer (perftest's
// server sends uninitialised memory; this side sends zeros).
func (p *Protocol) SetReport(r BWReport) { p.myReport = r }

// PeerVersion returns the version the peer announced.
func (p *Protocol) PeerVersion() Version { return p.peerVersion }

// PeerDest returns the peer's handshake data for test connection i.
func (p *Protocol) PeerDest(i int) Dest { return p.peer[i] }

// PeerReport returns the peer's bandwidth report (after the exchange).
func (p *Protocol) PeerReport() BWReport { return p.peerReport }

// CycleBuffer returns the cycle buffer both sides use: the larger page
// size.
func (p *Protocol) CycleBuffer() int { return p.cycleBuffer }

// CacheLineSize returns the larger cache line size of the two sides.
func (p *Protocol) CacheLineSize() int { return p.cacheLine }

// MTU returns the MTU in bytes both sides print: the smaller valid one.
func (p *Protocol) MTU() int { return mtuBytes(p.mtu) }
