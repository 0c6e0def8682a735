package mpa

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

func TestHandshake_AcceptOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		req, err := ReadRequest(ctx, server, &Config{IRD: 8, ORD: 8, P2P: true})
		if err != nil {
			done <- out{nil, err}
			return
		}
		if string(req.Frame.PrivateData) != "hello" {
			done <- out{nil, errors.New("wrong private data " + string(req.Frame.PrivateData))}
			return
		}
		res, err := req.Accept(ctx, []byte("welcome"))
		done <- out{res, err}
	}()
	ires, err := Connect(ctx, client, &Config{IRD: 4, ORD: 4, P2P: true}, []byte("hello"))
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)

	require.Equal(t, "welcome", string(ires.PeerPrivateData))
	require.Equal(t, "hello", string(r.res.PeerPrivateData))
	require.True(t, ires.CRC)
	require.True(t, r.res.CRC)
	require.Equal(t, uint16(4), ires.ORD)
	require.Equal(t, uint16(4), r.res.ORD)
	require.Equal(t, RTRWrite, ires.RTR)
	require.True(t, ires.SendRTR)
	require.True(t, r.res.WaitForPeerFPDU)

	// Deadlines were cleared: a read now waits for data instead of failing.
	go func() { time.Sleep(20 * time.Millisecond); client.Write([]byte("x")) }()
	var b [1]byte
	_, err = io.ReadFull(server, b[:])
	require.NoError(t, err)
}

func TestHandshake_RejectReachesInitiator(t *testing.T) {
	client, server := tcpPair(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		req, err := ReadRequest(ctx, server, &Config{})
		if err == nil {
			err = req.Reject(ctx, []byte("go away"))
			if err == nil {
				err = req.Reject(ctx, nil) // answering twice is refused
				if errors.Is(err, ErrState) {
					err = nil
				}
			}
		}
		done <- err
	}()
	_, err := Connect(ctx, client, &Config{}, nil)
	require.ErrorIs(t, err, ErrRejected)
	var re *RejectedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "go away", string(re.PrivateData))
	require.NoError(t, <-done)
}

// FPDUs that the responder sends right behind its Reply are left unread for
// the FPDU reader (a siw responder may send at once).
func TestHandshake_BytesAfterReplyStayInSocket(t *testing.T) {
	client, server := tcpPair(t)
	ctx := context.Background()
	fpdu := []byte{0, 14, 0xc1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	go func() {
		f, err := ReadFrame(server, MaxPrivateData)
		if err != nil {
			return
		}
		rep, _, err := AnswerRequest(&Config{CRC: CRCOff}, &f, nil)
		if err != nil {
			return
		}
		b, _ := AppendFrame(nil, &rep)
		server.Write(append(b, fpdu...)) // one write: reply and FPDU together
	}()
	res, err := Connect(ctx, client, &Config{CRC: CRCOff}, nil)
	require.NoError(t, err)
	require.False(t, res.CRC)
	got := make([]byte, len(fpdu))
	_, err = io.ReadFull(client, got)
	require.NoError(t, err)
	require.Equal(t, fpdu, got)
}

func TestHandshake_TimeoutWhenPeerIsSilent(t *testing.T) {
	client, _ := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Connect(ctx, client, &Config{}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second, "the wait was bounded")
}

func TestHandshake_CancelInterruptsRead(t *testing.T) {
	_, server := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	_, err := ReadRequest(ctx, server, &Config{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestHandshake_AlreadyCancelled(t *testing.T) {
	client, _ := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Connect(ctx, client, &Config{}, nil)
	require.ErrorIs(t, err, context.Canceled)
}

// An improperly formatted Request, such as an enhanced one too short for
// its IRD/ORD block or one with a bad key, gets no reply at all (RFC 5044
// §7.1.2 rule 2); the application never sees it.
func TestHandshake_MalformedRequests(t *testing.T) {
	t.Run("short enhanced", func(t *testing.T) {
		client, server := tcpPair(t)
		_, err := client.Write(testutil.Unhex(t, reqKeyHex+"10 02 00 02 00 01"))
		require.NoError(t, err)
		_, err = ReadRequest(context.Background(), server, &Config{})
		require.ErrorIs(t, err, ErrShortEnhanced)
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.False(t, pe.RejectReply)
		server.Close()
		n, err := client.Read(make([]byte, 1))
		require.Zero(t, n, "nothing was sent back")
		require.ErrorIs(t, err, io.EOF)
	})
	t.Run("bad key", func(t *testing.T) {
		client, server := tcpPair(t)
		_, err := client.Write(testutil.Unhex(t, "4d 50 41 20 49 44 20 42 61 64 20 46 72 61 6d 65 00 01 00 00"))
		require.NoError(t, err)
		_, err = ReadRequest(context.Background(), server, &Config{})
		require.ErrorIs(t, err, ErrBadKey)
		server.Close()
		n, err := client.Read(make([]byte, 1))
		require.Zero(t, n, "nothing was sent back")
		require.ErrorIs(t, err, io.EOF)
	})
	t.Run("reply key on the passive side", func(t *testing.T) {
		client, server := tcpPair(t)
		_, err := client.Write(testutil.Unhex(t, repKeyHex+"00 01 00 00"))
		require.NoError(t, err)
		_, err = ReadRequest(context.Background(), server, &Config{})
		require.ErrorIs(t, err, ErrBadKey)
	})
	t.Run("peer closes mid-frame", func(t *testing.T) {
		client, server := tcpPair(t)
		_, err := client.Write(testutil.Unhex(t, reqKeyHex)[:10])
		require.NoError(t, err)
		client.Close()
		_, err = ReadRequest(context.Background(), server, &Config{})
		require.ErrorIs(t, err, ErrConnectionLost)
	})
	t.Run("markers refused by the responder", func(t *testing.T) {
		client, server := tcpPair(t)
		done := make(chan error, 1)
		go func() {
			_, err := ReadRequest(context.Background(), server, &Config{RefuseMarkers: true})
			done <- err
		}()
		_, err := Connect(context.Background(), client, &Config{RequestMarkers: true}, nil)
		require.ErrorIs(t, err, ErrRejected)
		require.ErrorIs(t, <-done, ErrMarkersRefused)
	})
}

func TestHandshake_AcceptRejectsTooMuchPrivateDataForSiw(t *testing.T) {
	client, server := tcpPair(t)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := Connect(ctx, client, &Config{}, nil)
		errc <- err
	}()
	req, err := ReadRequest(ctx, server, &Config{})
	require.NoError(t, err)
	_, err = req.Accept(ctx, make([]byte, 300))
	require.ErrorIs(t, err, ErrSiwLimit)
	// The request is still open: the application can reject instead.
	require.NoError(t, req.Reject(ctx, []byte("too big")))
	require.ErrorIs(t, <-errc, ErrRejected)
}
