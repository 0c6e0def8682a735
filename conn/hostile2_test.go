package conn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// The hostile-peer suite, round two: what an attacker on the wire could
// still do after the first (issue 11 of the project's tracker).

// returnsWithin fails the test if fn has not returned after d. It detects
// hangs: d is generous, far above what the call needs, and is no speed
// assertion.
func returnsWithin(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

const hangLimit = 20 * time.Second

// RFC 6581: with a Send RTR negotiated, the first FPDU must be exactly a
// complete zero-length Send with MSN 1; anything else ends the stream with
// "no matching RTR" and never consumes a receive. (A zero-length Send
// without L was once taken as the RTR and made the next Send pop an empty
// receive queue: a crash of the process.)
func TestHostile_SendRTR_RFC6581_FirstFPDU(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(s *hostileServer) []byte
	}{
		{"zero-length Send without L", func(*hostileServer) []byte { return uSend(rdmap.OpSend, false, 0, 0, 1, 0, nil) }},
		{"Send with payload", func(*hostileServer) []byte { return uSend(rdmap.OpSend, true, 0, 0, 1, 0, []byte("x")) }},
		{"zero-length Send, MSN 2", func(*hostileServer) []byte { return uSend(rdmap.OpSend, true, 0, 0, 2, 0, nil) }},
		{"Send with Solicited Event", func(*hostileServer) []byte { return uSend(rdmap.OpSendSE, true, 0, 0, 1, 0, nil) }},
		{"a Write instead", func(s *hostileServer) []byte {
			return uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, []byte("data"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t, WithP2P(RTRSend))
			// Another queue pair's receive holds a reservation on the same
			// CQ: an unchecked pop would not panic at once but corrupt it.
			other, err := s.pd.NewQP(s.cq, QPCaps{})
			require.NoError(t, err)
			require.NoError(t, other.PostRecv(RecvWR{ID: 77}))
			defer other.Close()

			p := s.dial(mpa.Config{IRD: 1, ORD: 1, P2P: true, RTR: mpa.RTRSend})
			require.Equal(t, mpa.RTRSend, p.res.RTR)
			p.send(tc.first(s), uSend(rdmap.OpSend, true, 0, 0, 1, 0, []byte("after")))
			require.Equal(t, wantTerminate(rdmap.NoMatchingRTR, nil, 0, nil), p.terminate())
			<-s.qp.finished // Err's Delivery is final once the queue pair is closed
			var te *rdmap.TerminateError
			require.ErrorAs(t, s.qp.Err(), &te)
			require.Equal(t, termcode.MPANoMatchingRTR, te.Code)
			require.Equal(t, rdmap.DeliverySent, te.Delivery, "%v", te)
			s.checkArena()
		})
	}
	t.Run("the RTR, then a Send", func(t *testing.T) {
		checkLeaks(t)
		s := newHostileServer(t, WithP2P(RTRSend))
		require.NoError(t, s.qp.PostRecv(RecvWR{ID: 5, SGL: []SGE{s.recv.SGE(0, 64)}}))
		p := s.dial(mpa.Config{IRD: 1, ORD: 1, P2P: true, RTR: mpa.RTRSend})
		p.send(uSend(rdmap.OpSend, true, 0, 0, 1, 0, nil), uSend(rdmap.OpSend, true, 0, 0, 2, 0, []byte("hello")))
		wc := s.wait(t)
		require.NoError(t, wc.Err())
		require.Equal(t, uint64(5), wc.ID, "the RTR consumed no receive; the Send with MSN 2 filled it")
		require.Equal(t, uint32(5), wc.ByteLen)
		s.placed(s.recv, 0, []byte("hello"))
		s.qp.Close()
		s.checkArena()
	})
}

// A protocol error while a large Read Response is stuck behind a peer that
// stopped reading: Done fires, the stuck write is cut short, Close and Abort
// return whatever the peer does, and Err says the Terminate could not go
// out (the stream stopped in the middle of an FPDU).
func TestHostile_ErrorWhilePeerStoppedReading(t *testing.T) {
	for _, how := range []string{"Close", "Abort"} {
		t.Run(how, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t)
			big, err := s.pd.Register(make([]byte, 64<<20), RemoteRead)
			require.NoError(t, err)
			p := s.dial(mpa.Config{IRD: 1, ORD: 1})
			p.c.(*net.TCPConn).SetReadBuffer(64 << 10)
			p.send(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 0x77, Size: 64 << 20, SrcSTag: uint32(big.STag()), SrcTO: big.Remote(0).TO}))
			// Let the response fill both socket buffers, then offend: a
			// Terminate offered while the socket still takes bytes would
			// be delivered, which is not the case under test.
			for big.r.RemoteUses() == 0 {
				time.Sleep(time.Millisecond)
			}
			waitTxStalled(t, s.qp, rdmap.OpReadResponse)
			p.send(uTagged(rdmap.OpWrite, true, 0xdead00, 0, []byte("no such STag")))
			<-s.qp.Done()
			returnsWithin(t, hangLimit, how, func() {
				if how == "Close" {
					s.qp.Close()
				} else {
					s.qp.Abort()
				}
			})
			var te *rdmap.TerminateError
			require.ErrorAs(t, s.qp.Err(), &te)
			require.Equal(t, termcode.DDPTaggedInvalidSTag, te.Code)
			require.Equal(t, rdmap.DeliveryFailed, te.Delivery, "%v", te)
			require.Contains(t, te.Error(), "Terminate not sent")
			require.Zero(t, big.r.RemoteUses(), "the response's reference is gone")
			require.NoError(t, big.Deregister())
		})
	}
}

// Abort cuts a graceful Close short: Close waits for a large Write the peer
// does not read, Abort resets the connection, both return.
func TestHostile_AbortDuringClose(t *testing.T) {
	checkLeaks(t)
	s := newHostileServer(t)
	p := s.dial(mpa.Config{IRD: 1, ORD: 1})
	p.c.(*net.TCPConn).SetReadBuffer(64 << 10)
	p.send(uTagged(rdmap.OpWrite, true, 1, 0, nil)) // lets the responder send
	src, err := s.pd.Register(make([]byte, 32<<20), 0)
	require.NoError(t, err)
	require.NoError(t, s.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, src.Len())}, Remote: RemoteAddr{STag: 0x1234}}))
	time.Sleep(100 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		s.qp.Close()
		close(closed)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned although the peer read nothing")
	default:
	}
	returnsWithin(t, hangLimit, "Abort", func() { s.qp.Abort() })
	returnsWithin(t, hangLimit, "Close", func() { <-closed })
	wc := s.wait(t)
	require.Equal(t, WCWRFlushErr, wc.Status)
	require.NoError(t, src.Deregister())
}

// Close during a Connect to a server that accepts TCP and then says
// nothing: Connect fails with ErrQPClosed, and Close does not wait for the
// setup timeout (set to an hour here).
func TestHostile_CloseDuringConnectToSilentServer(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c
		}
	}()
	ep := newEndpoint(t, QPCaps{})
	require.NoError(t, ep.qp.PostRecv(RecvWR{ID: 3}))
	errc := make(chan error, 1)
	go func() {
		errc <- ep.qp.Connect(context.Background(), "tcp", ln.Addr().String(), WithSetupTimeout(time.Hour))
	}()
	c := <-held
	defer c.Close()
	returnsWithin(t, hangLimit, "Close", func() { ep.qp.Close() })
	err = <-errc
	require.ErrorIs(t, err, ErrQPClosed)
	require.ErrorIs(t, ep.qp.Err(), ErrQPClosed)
	wc := ep.wait(t)
	require.Equal(t, WCWRFlushErr, wc.Status)
	require.Equal(t, uint64(3), wc.ID)
}

// After Invalidate or Deregister returns, no peer reads a byte of the
// region: a Read Response stuck behind a peer that stopped reading is cut,
// and what the peer receives afterwards holds none of the bytes the
// program wrote into the memory after the call returned.
func TestHostile_RemoteReadAfterRevoke(t *testing.T) {
	for _, how := range []string{"Invalidate", "Deregister"} {
		t.Run(how, func(t *testing.T) {
			checkLeaks(t)
			s := newHostileServer(t)
			buf := bytes.Repeat([]byte{0x11}, 64<<20)
			big, err := s.pd.Register(buf, RemoteRead)
			require.NoError(t, err)
			p := s.dial(mpa.Config{IRD: 1, ORD: 1})
			p.c.(*net.TCPConn).SetReadBuffer(64 << 10)
			p.send(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 0x77, Size: uint32(len(buf)), SrcSTag: uint32(big.STag()), SrcTO: big.Remote(0).TO}))
			for big.r.RemoteUses() == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			returnsWithin(t, hangLimit, how, func() {
				if how == "Invalidate" {
					require.NoError(t, big.Invalidate())
				} else {
					require.NoError(t, big.Deregister())
				}
			})
			require.Zero(t, big.r.RemoteUses())
			// The memory is the program's again.
			for i := range buf {
				buf[i] = 0xEE
			}
			// Everything the peer gets from now on: Read Response payload
			// (all of it the old bytes), then a Terminate or the end.
			p.c.SetReadDeadline(time.Now().Add(hangLimit))
			got, term := 0, false
			for {
				u, err := p.r.ReadFPDU(make([]byte, 1<<16))
				if err != nil {
					break
				}
				h, err := rdmap.Parse(u, len(u))
				require.NoError(t, err)
				switch h.Op {
				case rdmap.OpReadResponse:
					payload := u[h.Len:]
					require.Equal(t, -1, bytes.IndexByte(payload, 0xEE), "the peer read memory after %s returned", how)
					got += len(payload)
				case rdmap.OpTerminate:
					term = true
				}
			}
			require.Less(t, got, len(buf), "the response was cut short")
			<-s.qp.finished
			var te *rdmap.TerminateError
			require.ErrorAs(t, s.qp.Err(), &te)
			require.Equal(t, rdmap.ReadReqSourceInvalidSTag.Code(), te.Code)
			if term {
				require.Equal(t, rdmap.DeliverySent, te.Delivery)
			}
		})
	}
}

// After Deregister returns, no peer writes a byte of the region: a Write
// whose payload stalled half way is cut, the rest never lands, and the
// peer is told the STag is invalid. Without CRC the placement of the
// stalled Write is under way (cut-through) and Deregister revokes it; with
// CRC nothing of the FPDU is placed before it has all arrived and its CRC
// checked (RFC 5044 §6), so Deregister finds no placement to revoke.
func TestHostile_RemoteWriteAfterRevoke(t *testing.T) {
	for _, crc := range []bool{false, true} {
		t.Run(fmt.Sprintf("crc=%v", crc), func(t *testing.T) {
			checkLeaks(t)
			mode := mpa.CRCOff
			if crc {
				mode = mpa.CRCRequired
			}
			s := newHostileServer(t, WithCRC(mode))
			p := s.dial(mpa.Config{IRD: 1, ORD: 1, CRC: mode})
			require.Equal(t, crc, p.res.CRC)
			payload := bytes.Repeat([]byte{0x77}, 3000)
			u := uTagged(rdmap.OpWrite, true, uint32(s.rw.STag()), s.rw.Remote(0).TO, payload)
			f := p.frame(u)
			p.sendRaw(f[:1000]) // header and part of the payload, then nothing
			if !crc {
				eventually(t, "the placement to begin", func() bool { return s.rw.r.RemoteUses() > 0 })
			}
			returnsWithin(t, hangLimit, "Deregister", func() { require.NoError(t, s.rw.Deregister()) })
			require.Zero(t, s.rw.r.RemoteUses())
			snapshot := append([]byte(nil), s.arena...)
			// The rest of the Write, and more, after the memory was given back.
			p.c.SetWriteDeadline(time.Now().Add(time.Second))
			p.c.Write(f[1000:])
			hdr := u[:ddp.TaggedHeaderLen]
			require.Equal(t, wantTerminate(rdmap.WriteInvalidSTag, hdr, len(u), nil), p.terminate())
			<-s.qp.finished
			require.Equal(t, snapshot, s.arena, "bytes landed after Deregister returned")
			var te *rdmap.TerminateError
			require.ErrorAs(t, s.qp.Err(), &te)
			require.Equal(t, termcode.DDPTaggedInvalidSTag, te.Code)
			if !crc {
				require.True(t, errors.Is(s.qp.Err(), net.ErrClosed), "the revoked placement's read was cut: %v", s.qp.Err())
			}
		})
	}
}

// PostSend after Close says the queue pair is closed, once.
func TestPostAfterClose_SaysClosedOnce(t *testing.T) {
	checkLeaks(t)
	client, _ := connectPair(t, pairConfig{})
	require.NoError(t, client.qp.Close())
	err := client.qp.PostSend(SendWR{Op: OpSend})
	require.ErrorIs(t, err, ErrQPClosed)
	require.Equal(t, "iwarp: queue pair closed", err.Error())
	err = client.qp.PostRecv(RecvWR{})
	require.Equal(t, "iwarp: queue pair closed", err.Error())
}

// waitTxStalled returns once qp has framed no more bytes of op for a
// quarter of a second, long after its transmitter was starved of a CPU
// by anything but a socket that takes nothing (a fixed sleep was not
// enough on a loaded machine: the response had not filled the buffers).
func waitTxStalled(t *testing.T, qp *QP, op rdmap.Opcode) {
	t.Helper()
	const quiet = 250 * time.Millisecond
	deadline := time.Now().Add(hangLimit)
	last, since := qp.Stats().BytesSent[op], time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("the transmitter still framed %v bytes after %v", op, hangLimit)
		}
		time.Sleep(10 * time.Millisecond)
		if n := qp.Stats().BytesSent[op]; n != last {
			last, since = n, time.Now()
		}
	}
	if last == 0 {
		t.Fatalf("no %v bytes framed", op)
	}
}
