package conn

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/stretchr/testify/require"
)

// TestSetup_SilentPeersAreCutOff: a peer that connects and never sends its
// MPA Request, sends part of one, or trickles it a byte at a time, is
// dropped by the setup timeout; the listener keeps serving others and holds
// nothing for the dropped peers.
func TestSetup_SilentPeersAreCutOff(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithSetupTimeout(300*time.Millisecond))
	require.NoError(t, err)
	defer ln.Close()

	request := append([]byte("MPA ID Req Frame"), 0x10, 2, 0, 4, 0, 1, 0, 1)
	behaviours := map[string]func(c net.Conn){
		"silent":  func(c net.Conn) {},
		"partial": func(c net.Conn) { c.Write(request[:10]) },
		"trickle": func(c net.Conn) {
			for _, b := range request[:len(request)-1] {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(40 * time.Millisecond)
			}
		},
	}
	for name, behave := range behaviours {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			start := time.Now()
			go behave(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := io.Copy(io.Discard, c)
			if errors.Is(err, syscall.ECONNRESET) {
				err = nil // closed with the trickler's bytes unread: a reset
			}
			require.NoError(t, err, "the listener closes the connection (EOF or reset), it does not leave it open")
			require.Zero(t, n, "no Reply to an incomplete Request")
			require.Less(t, time.Since(start), 3*time.Second)
		})
	}

	// A well-behaved peer still gets through.
	server := newEndpoint(t, QPCaps{})
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, server.qp) }()
	client := newEndpoint(t, QPCaps{})
	require.NoError(t, client.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)
	client.qp.Close()
	server.qp.Close()
}

// TestReject_WaitsForTheInitiatorToClose: after a reject Reply the
// responder keeps the connection open until the initiator closes (bounded),
// so a FIN never races the Reply's private data.
func TestReject_WaitsForTheInitiatorToClose(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	rejected := make(chan error, 1)
	go func() {
		cr, err := ln.AcceptRequest(ctx)
		if err != nil {
			rejected <- err
			return
		}
		rejected <- cr.Reject(ctx, []byte("no"))
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = mpa.Connect(ctx, c, &mpa.Config{}, nil)
	require.ErrorIs(t, err, mpa.ErrRejected)
	// The responder has not closed: a read waits instead of seeing EOF.
	c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout, got %v", err)
	select {
	case err := <-rejected:
		t.Fatalf("Reject returned (%v) before the initiator closed", err)
	default:
	}
	c.Close()
	require.NoError(t, <-rejected)
}

// A connect whose peer never answers says what it waited for.
func TestSetup_NoReplySaysSo(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	ep := newEndpoint(t, QPCaps{})
	err = ep.qp.Connect(context.Background(), "tcp", ln.Addr().String(), WithSetupTimeout(200*time.Millisecond))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "no MPA Reply from "+ln.Addr().String()+" within 200ms")
}
