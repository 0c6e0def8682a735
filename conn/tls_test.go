package conn

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// tlsPair connects two endpoints inside TLS over loopback TCP: the server
// has a certificate from ca, the client trusts ca.
func tlsPair(t *testing.T, ca *tlstest.CA, pc pairConfig) (client, server *endpoint) {
	t.Helper()
	pc.clientOpts = append([]Option{WithTLS(ca.Client(t, ""))}, pc.clientOpts...)
	pc.serverOpts = append([]Option{WithTLS(ca.Server(t, "server", nil))}, pc.serverOpts...)
	return connectPair(t, pc)
}

// Write, Read and Send run unchanged inside TLS, with and without CRC;
// both queue pairs show the TLS state, the client the server's certificate.
func TestTLS_WriteReadSend(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	for _, tc := range []struct {
		name string
		opts []Option
		crc  bool
	}{
		{"CRC by default (RFC 5044 §4.4)", nil, true},
		{"CRC off on both ends", []Option{WithCRC(CRCOff)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			var note *MR
			client, server := tlsPair(t, ca, pairConfig{clientOpts: tc.opts, serverOpts: tc.opts, beforeAccept: func(s *endpoint) {
				note = s.register(t, 16, LocalWrite)
				require.NoError(t, s.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{note.SGE(0, 16)}}))
			}})
			require.Equal(t, tc.crc, client.qp.Negotiated().CRC)
			require.Equal(t, tc.crc, server.qp.Negotiated().CRC)
			require.True(t, client.qp.PeerIsIwarpGo())

			target := server.register(t, 1<<20, LocalWrite|RemoteWrite|RemoteRead)
			src := client.register(t, 1<<20, 0)
			copy(src.Bytes(), pattern(1<<20, 5))
			require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 1<<20)}, Remote: target.Remote(0)}))
			client.waitOK(t, WCRDMAWrite)
			sink := client.register(t, 1<<20, LocalWrite)
			require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 1<<20)}, Remote: target.Remote(0)}))
			require.Equal(t, uint32(1<<20), client.waitOK(t, WCRDMARead).ByteLen)
			require.Equal(t, src.Bytes(), sink.Bytes())
			msg := client.register(t, 16, 0)
			copy(msg.Bytes(), "sixteen bytes ..")
			require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpSend, SGL: []SGE{msg.SGE(0, 16)}}))
			server.waitOK(t, WCRecv)
			require.Equal(t, "sixteen bytes ..", string(note.Bytes()))
			require.Equal(t, src.Bytes(), target.Bytes())

			cs, ok := client.qp.TLSState()
			require.True(t, ok)
			require.True(t, cs.HandshakeComplete)
			require.Equal(t, "iwarp", cs.NegotiatedProtocol)
			require.Equal(t, "server", cs.PeerCertificates[0].Subject.CommonName)
			ss, ok := server.qp.TLSState()
			require.True(t, ok)
			require.Empty(t, ss.PeerCertificates, "the client sent no certificate")
		})
	}
}

// A queue pair without TLS has no TLS state.
func TestTLS_StateAbsentWithoutTLS(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	_, ok := client.qp.TLSState()
	require.False(t, ok)
	_, ok = server.qp.TLSState()
	require.False(t, ok)
	_, ok = newEndpoint(t, QPCaps{}).qp.TLSState()
	require.False(t, ok)
}

// Mutual authentication: a listener that requires a client certificate
// refuses a client without one (and counts it); the QP it accepts from a
// client with one shows that certificate, and so does the request.
func TestTLS_MutualAuth(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", ca)))
	require.NoError(t, err)
	defer ln.Close()

	anon := newEndpoint(t, QPCaps{})
	err = anon.qp.Connect(ctx, "tcp", ln.Addr().String(), WithTLS(ca.Client(t, "")))
	require.Error(t, err)
	t.Log(err)
	require.ErrorContains(t, err, "certificate")
	require.ErrorContains(t, err, "TLS")
	require.Eventually(t, func() bool { return ln.Stats().TLSFailed == 1 }, 10*time.Second, 5*time.Millisecond)

	client := newEndpoint(t, QPCaps{})
	server := newEndpoint(t, QPCaps{})
	type accepted struct {
		cn  string
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			acc <- accepted{err: err}
			return
		}
		st, ok := cr.TLSState()
		cn := ""
		if ok && len(st.PeerCertificates) > 0 {
			cn = st.PeerCertificates[0].Subject.CommonName
		}
		acc <- accepted{cn: cn, err: cr.Accept(ctx, server.qp)}
	}()
	require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String(), WithTLS(ca.Client(t, "client-7"))))
	a := <-acc
	require.NoError(t, a.err)
	require.Equal(t, "client-7", a.cn)
	st, ok := server.qp.TLSState()
	require.True(t, ok)
	require.Equal(t, "client-7", st.PeerCertificates[0].Subject.CommonName)
	client.qp.Close()
	server.qp.Close()
}

// A TLS initiator that meets a listener without TLS fails at setup with
// ErrTLSHandshake, saying the peer hung up on the ClientHello; the
// listener counts a bad request.
func TestTLS_ClientMeetsPlainListener(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ep := newEndpoint(t, QPCaps{})
	returnsWithin(t, hangLimit, "Connect", func() {
		err = ep.qp.Connect(ctx, "tcp", ln.Addr().String(), WithTLS(ca.Client(t, "")), WithSetupTimeout(5*time.Second))
	})
	t.Log(err)
	require.ErrorIs(t, err, ErrTLSHandshake)
	require.ErrorContains(t, err, "without TLS")
	require.Eventually(t, func() bool { return ln.Stats().BadRequests == 1 }, 10*time.Second, 5*time.Millisecond)
}

// An initiator without TLS that meets a TLS listener is rejected in MPA
// (RFC 5044 §7.1.1, R set) with private data that says TLS is required,
// and fails with ErrTLSRequired; the listener counts it.
func TestTLS_PlainClientMeetsTLSListener(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)))
	require.NoError(t, err)
	defer ln.Close()
	ep := newEndpoint(t, QPCaps{})
	returnsWithin(t, hangLimit, "Connect", func() {
		err = ep.qp.Connect(ctx, "tcp", ln.Addr().String(), WithSetupTimeout(5*time.Second))
	})
	t.Log(err)
	require.ErrorIs(t, err, ErrTLSRequired)
	require.ErrorContains(t, err, "requires TLS")
	require.Eventually(t, func() bool { return ln.Stats().TLSRequired == 1 }, 10*time.Second, 5*time.Millisecond)
}

// WithTLS on Accept is refused: the handshake comes before the request.
func TestTLS_NotOnAccept(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	server := newEndpoint(t, QPCaps{})
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server.qp, WithTLS(ca.Server(t, "server", nil))) }()
	client := newEndpoint(t, QPCaps{})
	require.Error(t, client.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.ErrorIs(t, <-errc, ErrBadOption)
	require.ErrorIs(t, WithTLS(nil).apply(&config{}), ErrBadOption)
}

// recordingTap keeps every byte written through the connections it wraps.
type recordingTap struct {
	mu  sync.Mutex
	out bytes.Buffer
}

type recordingConn struct {
	net.Conn
	t *recordingTap
}

func (r *recordingTap) Wrap(c net.Conn) net.Conn { return &recordingConn{Conn: c, t: r} }

func (c *recordingConn) Write(p []byte) (int, error) {
	c.t.mu.Lock()
	c.t.out.Write(p)
	c.t.mu.Unlock()
	return c.Conn.Write(p)
}

// A tap sits above TLS: it records the plaintext iWARP stream (the MPA
// Request and the payload), which the dissectors can read.
func TestTLS_TapSeesPlaintext(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	var tap recordingTap
	var rbuf *MR
	client, server := tlsPair(t, ca, pairConfig{clientOpts: []Option{WithTap(&tap)}, beforeAccept: func(s *endpoint) {
		rbuf = s.register(t, 64, LocalWrite)
		require.NoError(t, s.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{rbuf.SGE(0, 64)}}))
	}})
	msg := client.register(t, 32, 0)
	copy(msg.Bytes(), "plaintext under the tap, TLS out")
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpSend, SGL: []SGE{msg.SGE(0, 32)}}))
	server.waitOK(t, WCRecv)
	_, ok := client.qp.TLSState()
	require.True(t, ok, "the tap hides nothing of the TLS stream beneath it")
	tap.mu.Lock()
	defer tap.mu.Unlock()
	require.Contains(t, tap.out.String(), "MPA ID Req Frame")
	require.Contains(t, tap.out.String(), "plaintext under the tap, TLS out")
}

// Abort of a TLS queue pair whose peer stopped reading returns at once,
// with a full send queue and full socket buffers: Close sends no
// close_notify that could wait for the peer.
func TestTLS_AbortWithStalledPeer(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	peer := startStalledTLSPeer(t, ca)
	ep := newEndpoint(t, QPCaps{SendDepth: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ep.qp.Connect(ctx, "tcp", peer, WithTLS(ca.Client(t, "")), WithCRC(CRCOff)))
	src := ep.register(t, 4<<20, 0)
	for i := range 8 {
		require.NoError(t, ep.qp.PostSend(SendWR{ID: uint64(i), Op: OpWrite, SGL: []SGE{src.SGE(0, 4<<20)}, Remote: RemoteAddr{STag: 0x100, TO: 0}}))
	}
	returnsWithin(t, hangLimit, "Abort", func() { ep.qp.Abort() })
	<-ep.qp.Done()
	require.ErrorIs(t, ep.qp.Err(), ErrQPClosed)
}

// startStalledTLSPeer is a TLS iWARP responder that completes setup, then
// reads nothing: its socket buffers fill and the initiator's writes block.
func startStalledTLSPeer(t *testing.T, ca *tlstest.CA) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cr, err := Server(ctx, c, WithTLS(ca.Server(t, "server", nil)))
		if err != nil {
			return
		}
		// Answer the Request by hand, then never read.
		b, err := replyFor(cr)
		if err != nil {
			return
		}
		cr.c.Write(b)
		<-stop
	}()
	t.Cleanup(func() {
		close(stop)
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// replyFor is the accepting Reply to cr's Request, as bytes.
func replyFor(cr *ConnRequest) ([]byte, error) {
	reply, _, err := mpa.AnswerRequest(&cr.cfg.mpa, &cr.req.Frame, nil)
	if err != nil {
		return nil, err
	}
	return mpa.AppendFrame(nil, &reply)
}

// TLS handshakes hold a listener's handshake slots (WithMaxHandshakes): a
// connection beyond them is closed at once, and a slot held by a stalled
// handshake comes free when it fails. A TLS request nobody accepts ages
// out (WithRequestTimeout) as a plain one does.
func TestTLS_ListenerLimits(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)),
		WithMaxHandshakes(2), WithRequestTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer ln.Close()
	var stalled []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00}) // a ClientHello's record header, then nothing
		require.NoError(t, err)
		stalled = append(stalled, c)
		eventually(t, "accepted", func() bool { return ln.Stats().Accepted == uint64(i+1) })
	}
	extra, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer extra.Close()
	require.True(t, closedByPeer(extra, hangLimit))
	require.Equal(t, uint64(1), ln.Stats().HandshakesRefused)

	stalled[0].Close()
	eventually(t, "the slot is free", func() bool { return ln.Stats().TLSFailed == 1 })
	ep := newEndpoint(t, QPCaps{})
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	err = ep.qp.Connect(ctx, "tcp", ln.Addr().String(), WithTLS(ca.Client(t, "")))
	require.Error(t, err, "nobody accepts: the request ages out and its connection is closed")
	eventually(t, "expired", func() bool { return ln.Stats().Expired == 1 })
	require.Equal(t, uint64(1), ln.Stats().HandshakesRefused)
}
