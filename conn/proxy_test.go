package conn

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// badNet is a TCP proxy that misbehaves, in each direction as that
// direction's faults say: it re-chunks the stream (coalesces what has
// arrived, then splits it at random byte boundaries), delays pieces,
// stalls the stream at given offsets, flips one bit, and ends the stream
// at a given offset with a FIN both ways, a reset both ways, or a FIN
// toward the receiver only (a half-close: the other direction goes on).
// A FIN or a reset from an endpoint is passed on as such.
type badNet struct {
	ln     net.Listener
	target string
	seed   uint64
	// up is client→server, down server→client; set before start.
	up, down faults

	stats faultStats
	done  chan struct{} // closed by close: every connection is torn down
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []*proxyConn
	once  sync.Once
}

// faults is what a badNet does to one direction of a connection. The zero
// value only re-chunks; newFaults gives one that does nothing else.
type faults struct {
	maxPiece int           // pieces of 1 to maxPiece bytes (0: 3000)
	delay    time.Duration // sleep this long before one piece in eight
	// flipAt flips the low bit of the byte this many bytes past the
	// direction's MPA Request or Reply; <0: none.
	flipAt int64
	cutAt  int64 // end the stream after this many bytes; <0: never
	cut    cutKind
	stalls []stall // hold the stream at these offsets, in increasing order
}

func newFaults() faults { return faults{flipAt: -1, cutAt: -1} }

// cutKind is how a badNet ends a stream at faults.cutAt.
type cutKind uint8

const (
	cutClose cutKind = iota // close both sides (FIN, or RST where data is unread)
	cutReset                // reset both sides
	cutHalf                 // FIN toward the receiver; what the sender sends next is dropped
)

func (k cutKind) String() string {
	return [...]string{"close", "reset", "half-close"}[k]
}

// stall holds a stream for d before the byte at offset at.
type stall struct {
	at int64
	d  time.Duration
}

// faultStats counts what a badNet did: faults that took effect, not those
// configured. A cut or a flip counts when a byte at its offset reached the
// proxy.
type faultStats struct {
	pieces, coalesced, delays, stalls atomic.Int64
	flips                             atomic.Int64
	cuts                              [3]atomic.Int64 // by cutKind
	cutsInSetup                       atomic.Int64    // before the MPA frame had passed
	bytes                             atomic.Int64    // forwarded
}

// fatal reports whether a fault that must end the connection took effect.
func (s *faultStats) fatal() bool {
	return s.flips.Load()+s.cuts[0].Load()+s.cuts[1].Load()+s.cuts[2].Load() > 0
}

// newBadNet starts a badNet in front of target, configured by configure
// (which sets up and down), and stops it at the end of the test.
func newBadNet(t *testing.T, target string, seed uint64, configure func(*badNet)) *badNet {
	b := &badNet{up: newFaults(), down: newFaults()}
	configure(b)
	require.NoError(t, b.start(target, seed))
	t.Cleanup(b.close)
	return b
}

// start listens on a loopback port and serves connections to target.
func (b *badNet) start(target string, seed uint64) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.ln, b.target, b.seed, b.done = ln, target, seed, make(chan struct{})
	b.wg.Add(1)
	go b.serve()
	return nil
}

func (b *badNet) addr() string { return b.ln.Addr().String() }

// close stops accepting, tears every connection down and waits for the
// proxy's goroutines.
func (b *badNet) close() {
	b.once.Do(func() {
		b.ln.Close()
		close(b.done)
		b.mu.Lock()
		for _, p := range b.conns {
			p.teardown(true)
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
}

// proxyConn is one proxied connection: c to the client, s to the server.
type proxyConn struct {
	c, s     *net.TCPConn
	gone     chan struct{} // closed by teardown
	once     sync.Once
	mu       sync.Mutex
	finished int // directions that are over
}

func (p *proxyConn) teardown(reset bool) {
	p.once.Do(func() {
		if reset {
			p.c.SetLinger(0)
			p.s.SetLinger(0)
		}
		p.c.Close()
		p.s.Close()
		close(p.gone)
	})
}

// directionOver tears the connection down once both directions are over.
func (p *proxyConn) directionOver() {
	p.mu.Lock()
	p.finished++
	both := p.finished == 2
	p.mu.Unlock()
	if both {
		p.teardown(false)
	}
}

func (b *badNet) serve() {
	defer b.wg.Done()
	for n := uint64(0); ; n++ {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		p := &proxyConn{c: c.(*net.TCPConn), s: s.(*net.TCPConn), gone: make(chan struct{})}
		b.mu.Lock()
		select {
		case <-b.done:
			b.mu.Unlock()
			p.teardown(true)
			return
		default:
		}
		b.conns = append(b.conns, p)
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(p, p.c, p.s, b.up, rand.New(rand.NewPCG(b.seed, 2*n)))
		go b.pipe(p, p.s, p.c, b.down, rand.New(rand.NewPCG(b.seed, 2*n+1)))
	}
}

// pipe carries one direction, src to dst, misbehaving as f says. A reader
// goroutine queues what src sends; pipe coalesces whatever is queued, then
// writes it in random pieces.
func (b *badNet) pipe(p *proxyConn, src, dst *net.TCPConn, f faults, rng *rand.Rand) {
	defer b.wg.Done()
	defer p.directionOver()
	type chunk struct {
		b   []byte
		err error // set on the last
	}
	q := make(chan chunk, 8)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			select {
			case q <- chunk{buf[:n], err}:
			case <-p.gone:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	maxPiece := f.maxPiece
	if maxPiece <= 0 {
		maxPiece = 3000
	}
	var (
		off      int64
		frameEnd int64  = -1 // stream offset where the MPA frame ends
		head     []byte      // the frame's first bytes, until its length is known
		dropping bool        // half-closed: what src sends is dropped
		stalls   = f.stalls
	)
	for {
		var c chunk
		select {
		case c = <-q:
		case <-p.gone:
			return
		}
		data := c.b
		// Coalesce what else has arrived.
		for merged := false; c.err == nil && len(data) < 256<<10; {
			select {
			case c = <-q:
				data = append(data, c.b...)
				if !merged {
					merged = true
					b.stats.coalesced.Add(1)
				}
				continue
			default:
			}
			break
		}
		if frameEnd < 0 && len(head) < mpa.FrameHeaderLen {
			head = append(head, data[:min(len(data), mpa.FrameHeaderLen-len(head))]...)
			if len(head) == mpa.FrameHeaderLen {
				frameEnd = mpa.FrameHeaderLen + int64(binary.BigEndian.Uint16(head[18:20]))
			}
		}
		for len(data) > 0 && !dropping {
			var k int
			switch rng.IntN(4) {
			case 0:
				k = 1 + rng.IntN(min(16, maxPiece))
			case 1:
				k = 1 + rng.IntN(min(512, maxPiece))
			default:
				k = 1 + rng.IntN(maxPiece)
			}
			k = min(k, len(data))
			if len(stalls) > 0 && stalls[0].at <= off {
				b.stats.stalls.Add(1)
				select {
				case <-time.After(stalls[0].d):
				case <-p.gone:
					return
				}
				stalls = stalls[1:]
			}
			if len(stalls) > 0 && stalls[0].at < off+int64(k) {
				k = int(stalls[0].at - off)
			}
			if f.cutAt >= 0 {
				if off >= f.cutAt {
					b.stats.cuts[f.cut].Add(1)
					if frameEnd < 0 || off < frameEnd {
						b.stats.cutsInSetup.Add(1)
					}
					switch f.cut {
					case cutClose:
						p.teardown(false)
						return
					case cutReset:
						p.teardown(true)
						return
					}
					dst.CloseWrite()
					dropping = true
					continue
				}
				if f.cutAt < off+int64(k) {
					k = int(f.cutAt - off)
				}
			}
			piece := data[:k]
			data = data[k:]
			if frameEnd >= 0 && f.flipAt >= 0 {
				if at := frameEnd + f.flipAt - off; at >= 0 && at < int64(k) {
					piece[at] ^= 1
					b.stats.flips.Add(1)
				}
			}
			if f.delay > 0 && rng.IntN(8) == 0 {
				b.stats.delays.Add(1)
				time.Sleep(f.delay)
			}
			if _, err := dst.Write(piece); err != nil {
				p.teardown(true) // the receiver is gone: so is the sender's peer
				return
			}
			b.stats.pieces.Add(1)
			b.stats.bytes.Add(int64(k))
			off += int64(k)
		}
		if c.err != nil {
			if !dropping {
				if !errors.Is(c.err, io.EOF) {
					// A reset from src, or our own teardown: reset dst too.
					p.teardown(true)
					return
				}
				dst.CloseWrite() // src's FIN
			}
			return
		}
	}
}

// proxiedPair connects a client to a server through a badNet.
func proxiedPair(t *testing.T, configure func(*badNet), opts ...Option) (client, server *endpoint, bn *badNet) {
	t.Helper()
	client = newEndpoint(t, QPCaps{})
	server = newEndpoint(t, QPCaps{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", opts...)
	require.NoError(t, err)
	defer ln.Close()
	bn = newBadNet(t, ln.Addr().String(), 7, configure)
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server.qp) }()
	require.NoError(t, client.qp.Connect(ctx, "tcp", bn.addr(), opts...))
	require.NoError(t, <-errc)
	t.Cleanup(func() { client.qp.Close(); server.qp.Close() })
	return client, server, bn
}

// TestBadNet_Rechunked: FPDUs cut at random boundaries and delayed arrive
// intact; every operation still moves the right bytes.
func TestBadNet_Rechunked(t *testing.T) {
	checkLeaks(t)
	client, server, _ := proxiedPair(t, func(b *badNet) { b.up.delay = time.Millisecond })
	rbuf := server.register(t, 1<<20, LocalWrite)
	target := server.register(t, 1<<20, LocalWrite|RemoteWrite|RemoteRead)
	src := client.register(t, 1<<20, LocalWrite)
	copy(src.Bytes(), pattern(1<<20, 1))
	sink := client.register(t, 1<<20, LocalWrite)
	for _, size := range []int{1, 1000, 70000, 1 << 20} {
		require.NoError(t, server.qp.PostRecv(RecvWR{SGL: []SGE{rbuf.SGE(0, 1<<20)}}))
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpWrite, SGL: []SGE{src.SGE(0, size)}, Remote: target.Remote(0)}))
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, size)}, Remote: target.Remote(0)}))
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{src.SGE(0, size)}}))
		client.waitOK(t, WCRDMARead)
		require.Equal(t, src.Bytes()[:size], sink.Bytes()[:size])
		require.Equal(t, uint32(size), server.waitOK(t, WCRecv).ByteLen)
		require.Equal(t, src.Bytes()[:size], rbuf.Bytes()[:size])
		require.Equal(t, src.Bytes()[:size], target.Bytes()[:size])
	}
}

// flipWorkload writes 64 KiB through a proxy that flips one bit 10000 bytes
// past the MPA Request (inside the Write's payload), then sends a note.
func flipWorkload(t *testing.T, opts ...Option) (client, server *endpoint, src, target *MR) {
	client, server, _ = proxiedPair(t, func(b *badNet) { b.up.flipAt = 10000 }, opts...)
	target = server.register(t, 64<<10, LocalWrite|RemoteWrite)
	require.NoError(t, server.qp.PostRecv(RecvWR{ID: 5}))
	src = client.register(t, 64<<10, 0)
	copy(src.Bytes(), pattern(64<<10, 2))
	_, err := client.qp.PostSendBatch([]SendWR{
		{Op: OpWrite, SGL: []SGE{src.SGE(0, 64<<10)}, Remote: target.Remote(0)},
		{ID: 6, Op: OpSend, Flags: Signaled},
	})
	require.NoError(t, err)
	return client, server, src, target
}

// TestBadNet_BitFlip_CRC: with CRC (the default) a flipped bit is caught:
// the receiver terminates with the MPA CRC error and the sender learns it
// from the Terminate.
func TestBadNet_BitFlip_CRC(t *testing.T) {
	checkLeaks(t)
	client, server, _, _ := flipWorkload(t)
	require.True(t, server.qp.Negotiated().CRC)
	<-server.qp.Done()
	var te *rdmap.TerminateError
	require.True(t, errors.As(server.qp.Err(), &te), "%v", server.qp.Err())
	require.False(t, te.Remote)
	require.Equal(t, rdmap.CRCError.Code(), te.Code)
	<-client.qp.Done()
	require.True(t, errors.As(client.qp.Err(), &te), "%v", client.qp.Err())
	require.True(t, te.Remote)
	require.Equal(t, rdmap.CRCError.Code(), te.Code)
	// The note after the Write never completes at the server.
	require.Equal(t, WCWRFlushErr, server.wait(t).Status)
}

// RFC 5044 §6: "An MPA receiver MUST first verify the FPDU before passing
// the ULPDU to DDP". Not one byte of the FPDU with the flipped bit reaches
// the target region: what was placed is a correct prefix of the Write
// (FPDUs before the damaged one), and nothing after it.
func TestBadNet_RFC5044_6_NothingPlacedBeforeTheCRC(t *testing.T) {
	checkLeaks(t)
	_, server, src, target := flipWorkload(t)
	<-server.qp.Done()
	got, want := target.Bytes(), src.Bytes()
	placed := 0
	for placed < len(got) && got[placed] == want[placed] {
		placed++
	}
	require.Less(t, placed, 10000, "the damaged payload byte was placed")
	for i := placed; i < len(got); i++ {
		require.Zero(t, got[i], "byte %d placed after an FPDU whose CRC failed", i)
	}
}

// TestBadNet_BitFlip_NoCRC documents what CRC protects against: without it
// nothing above TCP can see a payload bit flipped between the TCP stacks
// (a middlebox, a bad NIC offload); the data arrives corrupted and every
// operation succeeds.
func TestBadNet_BitFlip_NoCRC(t *testing.T) {
	checkLeaks(t)
	client, server, src, target := flipWorkload(t, WithCRC(CRCOff))
	require.False(t, server.qp.Negotiated().CRC)
	client.waitOK(t, WCSend)
	server.waitOK(t, WCRecv)
	diff := 0
	for i := range target.Bytes() {
		diff += bits.OnesCount8(target.Bytes()[i] ^ src.Bytes()[i])
	}
	require.Equal(t, 1, diff, "exactly the flipped bit differs, and nothing reported it")
	require.NoError(t, server.qp.Err())
}

// TestBadNet_Truncated: the connection ends in the middle of an FPDU; the
// receiver reports a lost connection and flushes its work.
func TestBadNet_Truncated(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := "fin"
		if reset {
			name = "rst"
		}
		t.Run(name, func(t *testing.T) {
			checkLeaks(t)
			client, server, _ := proxiedPair(t, func(b *badNet) {
				b.up.cutAt, b.up.cut = 20000, cutClose
				if reset {
					b.up.cut = cutReset
				}
			})
			target := server.register(t, 64<<10, LocalWrite|RemoteWrite)
			require.NoError(t, server.qp.PostRecv(RecvWR{ID: 5}))
			src := client.register(t, 64<<10, 0)
			require.NoError(t, client.qp.PostSend(SendWR{Op: OpWrite, SGL: []SGE{src.SGE(0, 64<<10)}, Remote: target.Remote(0)}))
			<-server.qp.Done()
			require.ErrorIs(t, server.qp.Err(), ErrConnectionLost)
			require.Equal(t, WCWRFlushErr, server.wait(t).Status)
			<-client.qp.Done()
			err := client.qp.Err()
			require.True(t, errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrPeerClosed), "%v", err)
		})
	}
}
