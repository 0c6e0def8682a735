package conn

import (
	"context"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// badNet is a TCP proxy that misbehaves in the client→server direction:
// it re-chunks the stream at random boundaries, delays chunks, flips one
// bit, truncates, or resets. The server→client direction is copied as is.
type badNet struct {
	ln     net.Listener
	target string
	rng    *rand.Rand
	delay  time.Duration
	flipAt int64 // stream offset whose low bit is flipped; <0: none
	cutAt  int64 // close both sides after this many bytes; <0: never
	reset  bool  // close with RST instead of FIN
	wg     sync.WaitGroup
}

func newBadNet(t *testing.T, target string, seed uint64) *badNet {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &badNet{ln: ln, target: target, rng: rand.New(rand.NewPCG(seed, seed)), flipAt: -1, cutAt: -1}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() { ln.Close(); b.wg.Wait() })
	return b
}

func (b *badNet) addr() string { return b.ln.Addr().String() }

func (b *badNet) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.wg.Add(2)
		go func() { defer b.wg.Done(); b.upstream(c, s) }()
		go func() { defer b.wg.Done(); io.Copy(c, s); c.Close(); s.Close() }()
	}
}

func (b *badNet) upstream(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := c.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			k := 1 + b.rng.IntN(min(len(data), 3000))
			chunk := data[:k]
			data = data[k:]
			if b.flipAt >= off && b.flipAt < off+int64(k) {
				chunk[b.flipAt-off] ^= 1
			}
			if b.cutAt >= 0 && off+int64(k) > b.cutAt {
				s.Write(chunk[:b.cutAt-off])
				if b.reset {
					c.(*net.TCPConn).SetLinger(0)
					s.(*net.TCPConn).SetLinger(0)
				}
				return
			}
			if b.delay > 0 && b.rng.IntN(8) == 0 {
				time.Sleep(b.delay)
			}
			if _, err := s.Write(chunk); err != nil {
				return
			}
			off += int64(k)
		}
		if err != nil {
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
	bn = newBadNet(t, ln.Addr().String(), 7)
	configure(bn)
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
	client, server, _ := proxiedPair(t, func(b *badNet) { b.delay = time.Millisecond })
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

// flipWorkload writes 64 KiB through a proxy that flips one bit at stream
// offset 10000 (inside the Write's payload), then sends a note.
func flipWorkload(t *testing.T, opts ...Option) (client, server *endpoint, src, target *MR) {
	client, server, _ = proxiedPair(t, func(b *badNet) { b.flipAt = 10000 }, opts...)
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
			client, server, _ := proxiedPair(t, func(b *badNet) { b.cutAt = 20000; b.reset = reset })
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
