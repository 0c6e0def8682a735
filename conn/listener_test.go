package conn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// requestOnly dials addr and sends a valid MPA Request, nothing more.
func requestOnly(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	f, err := mpa.BuildRequest(&mpa.Config{Revision: 2, IRD: 1, ORD: 1}, nil)
	require.NoError(t, err)
	b, err := mpa.AppendFrame(nil, &f)
	require.NoError(t, err)
	_, err = c.Write(b)
	require.NoError(t, err)
	return c.(*net.TCPConn)
}

// eventually polls cond until it holds, failing after hangLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v", what, hangLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedByPeer reports whether c's peer closed it (EOF or reset) within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 64))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Requests whose initiator reset its connection while the application was
// busy never reach AcceptRequest and hold no handshake slot: a good client
// that comes after hundreds of them is the first request the application
// sees.
func TestListener_DeadRequestsAreDropped(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	const dead = 300
	var cs []*net.TCPConn
	for i := 0; i < dead; i++ {
		cs = append(cs, requestOnly(t, ln.Addr().String()))
	}
	eventually(t, "all queued", func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return len(ln.queue) == dead })
	for _, c := range cs {
		c.SetLinger(0)
		c.Close() // RST
	}
	eventually(t, "dead requests dropped", func() bool { return ln.Stats().Dead == dead })

	pd := NewPD()
	qp, err := pd.NewQP(NewCQ(16), QPCaps{})
	require.NoError(t, err)
	defer qp.Close()
	errc := make(chan error, 1)
	go func() { errc <- qp.Connect(context.Background(), "tcp", ln.Addr().String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	cr, err := ln.AcceptRequest(ctx)
	require.NoError(t, err)
	require.True(t, cr.PeerIsIwarpGo(), "the first request handed out is the good client's")
	server, err := pd.NewQP(NewCQ(16), QPCaps{})
	require.NoError(t, err)
	defer server.Close()
	require.NoError(t, cr.Accept(ctx, server))
	require.NoError(t, <-errc)

	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = ln.AcceptRequest(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no dead request left to drain")
}

// A request nobody accepts within the request timeout is dropped, and its
// initiator sees the connection close.
func TestListener_RequestsAgeOut(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithRequestTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer ln.Close()
	c := requestOnly(t, ln.Addr().String())
	defer c.Close()
	require.True(t, closedByPeer(c, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().Expired)
}

// An initiator that sends anything before the Reply breaks RFC 5044
// §7.1.2 (the responder sends the Reply first): its request is dropped.
func TestListener_InitiatorSpeakingFirstIsDropped(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c := requestOnly(t, ln.Addr().String())
	defer c.Close()
	c.Write([]byte{0, 4, 1, 2})
	require.True(t, closedByPeer(c, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().Dead)
}

// The backlog bounds queued requests; one beyond it is closed.
func TestListener_BacklogBound(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithBacklog(2))
	require.NoError(t, err)
	defer ln.Close()
	var cs []net.Conn
	for i := 0; i < 3; i++ {
		c := requestOnly(t, ln.Addr().String())
		defer c.Close()
		cs = append(cs, c)
		if i < 2 {
			eventually(t, "queued", func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return len(ln.queue) == i+1 })
		}
	}
	require.True(t, closedByPeer(cs[2], hangLimit))
	require.Equal(t, uint64(1), ln.Stats().BacklogFull)
}

// WithMaxHandshakes: connections that send no MPA Request hold the
// handshake slots (until the setup timeout); one beyond them is closed at
// once, and a slot its peer gave up serves the next client.
func TestListener_MaxHandshakes(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithMaxHandshakes(2))
	require.NoError(t, err)
	defer ln.Close()
	var silent []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		silent = append(silent, c)
		eventually(t, "accepted", func() bool { return ln.Stats().Accepted == uint64(i+1) })
	}
	extra, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer extra.Close()
	require.True(t, closedByPeer(extra, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().HandshakesRefused)
	require.True(t, !closedByPeer(silent[1], 50*time.Millisecond), "a silent peer within the bound keeps its slot")

	silent[0].Close()
	eventually(t, "the slot is free", func() bool { return ln.Stats().BadRequests == 1 })
	pd := NewPD()
	client, err := pd.NewQP(NewCQ(16), QPCaps{})
	require.NoError(t, err)
	defer client.Close()
	server, err := pd.NewQP(NewCQ(16), QPCaps{})
	require.NoError(t, err)
	defer server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server) }()
	require.NoError(t, client.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)
	require.Equal(t, uint64(1), ln.Stats().HandshakesRefused)
}

// WithMaxConnections: a connection beyond the bound is closed at once; once
// an accepted one ends, a new one is served.
func TestListener_MaxConnections(t *testing.T) {
	checkLeaks(t)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithMaxConnections(1))
	require.NoError(t, err)
	defer ln.Close()
	pd := NewPD()
	connect := func() (client, server *QP) {
		client, err := pd.NewQP(NewCQ(16), QPCaps{})
		require.NoError(t, err)
		server, err = pd.NewQP(NewCQ(16), QPCaps{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(context.Background(), server) }()
		require.NoError(t, client.Connect(context.Background(), "tcp", ln.Addr().String()))
		require.NoError(t, <-errc)
		return client, server
	}
	c1, s1 := connect()
	extra, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer extra.Close()
	require.True(t, closedByPeer(extra, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().ConnectionsCapped)
	c1.Close()
	s1.Close()
	eventually(t, "the ended connection no longer counts", func() bool { ln.mu.Lock(); defer ln.mu.Unlock(); return ln.live == 0 })
	c2, s2 := connect()
	c2.Close()
	s2.Close()
}

// syncBuffer is a bytes.Buffer safe for a logger used by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An address whose connections keep ending in protection failures (STag
// guessing) is refused for a while, with one log line.
func TestListener_ProtectionFailureLimit_RFC5042(t *testing.T) {
	checkLeaks(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithProtectionFailureLimit(3, time.Minute), WithLogger(logger))
	require.NoError(t, err)
	defer ln.Close()
	pd := NewPD()
	for i := 0; i < 3; i++ {
		qp, err := pd.NewQP(NewCQ(16), QPCaps{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(context.Background(), qp) }()
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
		res, err := mpa.Connect(ctx, c, &mpa.Config{Revision: 2, IRD: 1, ORD: 1}, nil)
		cancel()
		require.NoError(t, err)
		require.NoError(t, <-errc)
		p := &rawPeer{t: t, c: c, res: res, r: mpa.NewReader(c, mpa.ReaderConfig{CRC: res.CRC})}
		p.send(uTagged(rdmap.OpWrite, true, 0x123400+uint32(i), 0, []byte("guess")))
		p.terminate()
		<-qp.finished
		c.Close()
	}
	eventually(t, "the address is blocked", func() bool {
		return bytes.Contains([]byte(logs.String()), []byte("address refused after protection failures"))
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.True(t, closedByPeer(c, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().AddressBlocked)
	require.Contains(t, logs.String(), "connection refused")
	require.Equal(t, 1, bytes.Count([]byte(logs.String()), []byte("address refused after protection failures")))
}

// WithIdleTimeout closes a connection that carried nothing for that long,
// and leaves one alone that keeps talking.
func TestIdleTimeout_RFC5044_7_1_2(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{serverOpts: []Option{WithIdleTimeout(150 * time.Millisecond)}})
	mr := client.register(t, 8, LocalWrite)
	remote := server.register(t, 8, LocalWrite|RemoteWrite)
	for i := 0; i < 8; i++ { // 400 ms of traffic every 50 ms
		require.NoError(t, client.qp.PostSend(SendWR{Op: OpWrite, SGL: []SGE{mr.SGE(0, 8)}, Remote: remote.Remote(0)}))
		time.Sleep(50 * time.Millisecond)
		select {
		case <-server.qp.Done():
			t.Fatalf("closed although busy: %v", server.qp.Err())
		default:
		}
	}
	returnsWithin(t, hangLimit, "the idle close", func() { <-server.qp.Done() })
	require.ErrorIs(t, server.qp.Err(), ErrIdleTimeout)
}

// WithLogger traces setup and teardown.
func TestLogger_TracesTheConnection(t *testing.T) {
	checkLeaks(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	client, _ := connectPair(t, pairConfig{clientOpts: []Option{WithLogger(logger)}})
	require.NoError(t, client.qp.Close())
	out := logs.String()
	require.Contains(t, out, "iwarp: connected")
	require.Contains(t, out, "role=initiator")
	require.Contains(t, out, "iwarp: closed")
	require.Contains(t, out, "queue pair closed")
}
