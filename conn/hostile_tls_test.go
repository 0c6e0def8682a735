package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// The hostile-peer suite inside TLS: raw peers on 127.0.0.1 that break the
// TLS layer itself. Each case must end bounded in time, with an error that
// names TLS, and leave no goroutine behind.

// rawServer accepts one TCP connection and runs serve on it; the test's
// end closes both.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// tlsListener is a TLS iWARP listener with a short setup timeout.
func tlsListener(t *testing.T, ca *tlstest.CA) *Listener {
	t.Helper()
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)), WithSetupTimeout(300*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// closedByListener reports that the listener closed c (EOF or reset)
// rather than leaving it open until the test's own deadline.
func closedByListener(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(hangLimit)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the listener kept the connection open")
}

// An initiator whose TLS handshake never completes (the peer accepts the
// TCP connection, reads the ClientHello and says nothing) fails within the
// setup timeout with ErrTLSHandshake and the deadline.
func TestHostileTLS_HandshakeNeverCompletes_Initiator(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	stop := make(chan struct{})
	addr := rawServer(t, func(c net.Conn) {
		io.Copy(io.Discard, c) // until the initiator gives up
		<-stop
	})
	defer close(stop)
	ep := newEndpoint(t, QPCaps{})
	var err error
	returnsWithin(t, hangLimit, "Connect", func() {
		err = ep.qp.Connect(context.Background(), "tcp", addr, WithTLS(ca.Client(t, "")), WithSetupTimeout(300*time.Millisecond))
	})
	require.ErrorIs(t, err, ErrTLSHandshake)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	<-ep.qp.Done()
}

// Close cuts a TLS handshake in progress: Connect returns ErrQPClosed.
func TestHostileTLS_CloseDuringHandshake(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	stop := make(chan struct{})
	addr := rawServer(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		<-stop
	})
	defer close(stop)
	ep := newEndpoint(t, QPCaps{})
	errc := make(chan error, 1)
	go func() { errc <- ep.qp.Connect(context.Background(), "tcp", addr, WithTLS(ca.Client(t, ""))) }()
	time.Sleep(50 * time.Millisecond) // into the handshake (the setup timeout is 10 s)
	returnsWithin(t, hangLimit, "Close", func() { ep.qp.Close() })
	require.ErrorIs(t, <-errc, ErrQPClosed)
}

// A listener drops a connection whose TLS handshake does not finish within
// the setup timeout, whether the initiator sends nothing or stops halfway
// through its ClientHello, and counts it.
func TestHostileTLS_HandshakeNeverCompletes_Listener(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"silent", nil},
		{"half a ClientHello", []byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			ca := tlstest.NewCA(t, "test CA")
			ln := tlsListener(t, ca)
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			if tc.send != nil {
				_, err = c.Write(tc.send)
				require.NoError(t, err)
			}
			closedByListener(t, c)
			require.Eventually(t, func() bool { return ln.Stats().TLSFailed == 1 }, hangLimit, 5*time.Millisecond)
		})
	}
}

// Bytes that are not a ClientHello are refused: by a listener (an HTTP
// request; bytes that start like an MPA key and are not one), and by an
// initiator whose peer answers its ClientHello with garbage.
func TestHostileTLS_GarbageInsteadOfClientHello(t *testing.T) {
	for _, garbage := range []string{"GET / HTTP/1.0\r\n\r\n", "MPA? no, garbage and more garbage"} {
		t.Run("listener/"+garbage[:4], func(t *testing.T) {
			checkLeaks(t)
			ca := tlstest.NewCA(t, "test CA")
			ln := tlsListener(t, ca)
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Write([]byte(garbage))
			require.NoError(t, err)
			closedByListener(t, c)
			require.Eventually(t, func() bool { return ln.Stats().TLSFailed == 1 }, hangLimit, 5*time.Millisecond)
			require.Zero(t, ln.Stats().BadRequests)
		})
	}
	t.Run("initiator", func(t *testing.T) {
		checkLeaks(t)
		ca := tlstest.NewCA(t, "test CA")
		addr := rawServer(t, func(c net.Conn) {
			var hello [5]byte
			io.ReadFull(c, hello[:])
			c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
		})
		ep := newEndpoint(t, QPCaps{})
		var err error
		returnsWithin(t, hangLimit, "Connect", func() {
			err = ep.qp.Connect(context.Background(), "tcp", addr, WithTLS(ca.Client(t, "")), WithSetupTimeout(5*time.Second))
		})
		require.ErrorIs(t, err, ErrTLSHandshake)
		require.ErrorContains(t, err, "tls:")
	})
}

// A peer that closes in the middle of a TLS record: during the handshake
// the listener counts a failed one; after setup, the queue pair ends with
// a lost connection (not a clean close) and flushes its receives.
func TestHostileTLS_PeerClosesMidRecord(t *testing.T) {
	t.Run("handshake", func(t *testing.T) {
		checkLeaks(t)
		ca := tlstest.NewCA(t, "test CA")
		ln := tlsListener(t, ca)
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		_, err = c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x80, 0x01, 0x00})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool { return ln.Stats().TLSFailed == 1 }, hangLimit, 5*time.Millisecond)
	})
	t.Run("after setup", func(t *testing.T) {
		checkLeaks(t)
		ca := tlstest.NewCA(t, "test CA")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)))
		require.NoError(t, err)
		defer ln.Close()
		server := newEndpoint(t, QPCaps{})
		buf := server.register(t, 64, LocalWrite)
		require.NoError(t, server.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{buf.SGE(0, 64)}}))
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(ctx, server.qp) }()

		raw, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		tc := tls.Client(raw, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"iwarp"}})
		_, err = mpa.Connect(ctx, tc, &mpa.Config{IRD: 1, ORD: 1}, nil)
		require.NoError(t, err)
		require.NoError(t, <-errc)
		// An application-data record header that promises 200 bytes, ten
		// of them, then FIN.
		_, err = raw.Write([]byte{0x17, 0x03, 0x03, 0x00, 0xc8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		require.NoError(t, err)
		require.NoError(t, raw.(*net.TCPConn).CloseWrite())
		select {
		case <-server.qp.Done():
		case <-time.After(hangLimit):
			t.Fatal("the queue pair did not end")
		}
		require.ErrorIs(t, server.qp.Err(), io.ErrUnexpectedEOF)
		require.ErrorContains(t, server.qp.Err(), "TLS stream ended inside a record")
		wc := server.wait(t)
		require.Equal(t, WCWRFlushErr, wc.Status)
		server.qp.Close()
	})
}

// Right after the handshake: an initiator that completes TLS and then says
// nothing, or resets the connection, is dropped by the listener within the
// setup timeout (a bad request: TLS itself went fine).
func TestHostileTLS_RightAfterTheHandshake(t *testing.T) {
	for _, how := range []string{"silent", "reset"} {
		t.Run(how, func(t *testing.T) {
			checkLeaks(t)
			ca := tlstest.NewCA(t, "test CA")
			ln := tlsListener(t, ca)
			raw, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer raw.Close()
			tc := tls.Client(raw, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"iwarp"}})
			require.NoError(t, tc.Handshake())
			if how == "reset" {
				require.NoError(t, raw.(*net.TCPConn).SetLinger(0))
				require.NoError(t, raw.Close())
			} else {
				closedByListener(t, raw)
			}
			require.Eventually(t, func() bool { return ln.Stats().BadRequests == 1 }, hangLimit, 5*time.Millisecond)
			require.Zero(t, ln.Stats().TLSFailed)
		})
	}
}

// A connected TLS queue pair whose peer goes silent or resets: Close
// returns (nothing is outstanding, so it need not wait for the peer), and
// a reset ends the queue pair on its own.
func TestHostileTLS_CloseAfterSetup(t *testing.T) {
	for _, how := range []string{"silent", "reset"} {
		t.Run(how, func(t *testing.T) {
			checkLeaks(t)
			ca := tlstest.NewCA(t, "test CA")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)))
			require.NoError(t, err)
			defer ln.Close()
			server := newEndpoint(t, QPCaps{})
			errc := make(chan error, 1)
			go func() { errc <- ln.Accept(ctx, server.qp) }()
			raw, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer raw.Close()
			tc := tls.Client(raw, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", NextProtos: []string{"iwarp"}})
			_, err = mpa.Connect(ctx, tc, &mpa.Config{IRD: 1, ORD: 1}, nil)
			require.NoError(t, err)
			require.NoError(t, <-errc)
			if how == "reset" {
				require.NoError(t, raw.(*net.TCPConn).SetLinger(0))
				require.NoError(t, raw.Close())
				select {
				case <-server.qp.Done():
				case <-time.After(hangLimit):
					t.Fatal("a reset did not end the queue pair")
				}
			}
			returnsWithin(t, hangLimit, "Close", func() { server.qp.Close() })
			<-server.qp.Done()
		})
	}
}
