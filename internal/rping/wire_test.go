package rping

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// message is one RDMAP message as seen on the wire (single-segment
// messages only, which is all rping's sizes here produce).
type message struct {
	op      rdmap.Opcode
	stag    uint32 // tagged
	to      uint64 // tagged
	qn, msn uint32 // untagged
	payload []byte
}

// parseStream splits one direction of an MPA connection, starting with its
// Request or Reply frame, into messages. It is written from RFC 5044 §4
// (FPDU: 2-byte ULPDU length, ULPDU, pad to 4, 4-byte CRC; no markers) and
// RFC 5041 §4 (DDP headers), independently of the mpa and ddp readers.
func parseStream(t *testing.T, b []byte) (mpa.Frame, []message) {
	t.Helper()
	f, n, err := mpa.ParseFrame(b)
	require.NoError(t, err)
	b = b[n:]
	var msgs []message
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 2)
		ulen := int(binary.BigEndian.Uint16(b))
		total := (2+ulen+3)&^3 + 4
		require.GreaterOrEqual(t, len(b), total, "truncated FPDU")
		u := b[2 : 2+ulen]
		b = b[total:]
		ddpCtrl, rdmapCtrl := u[0], u[1]
		require.NotZero(t, ddpCtrl&0x40, "rping's messages fit one segment (L bit)")
		m := message{op: rdmap.ControlOpcode(rdmapCtrl)}
		if ddpCtrl&0x80 != 0 {
			m.stag = binary.BigEndian.Uint32(u[2:6])
			m.to = binary.BigEndian.Uint64(u[6:14])
			m.payload = u[14:]
		} else {
			m.qn = binary.BigEndian.Uint32(u[6:10])
			m.msn = binary.BigEndian.Uint32(u[10:14])
			m.payload = u[18:]
		}
		msgs = append(msgs, m)
	}
	return f, msgs
}

// checkRpingConversation checks a whole rping conversation: per iteration
// the client sends its source advertisement, the server Reads the ping
// from it, says go ahead, the client sends its sink advertisement, the
// server Writes the ping back and says go ahead (rdma-core
// librdmacm/examples/rping.c: rping_test_client(), rping_test_server()).
// It returns the number of iterations.
func checkRpingConversation(t *testing.T, up, down []message, size int) int {
	t.Helper()
	// In peer-to-peer mode the client opens with an RTR: a zero-length
	// Write or Send, or a zero-length Read that the server answers with a
	// zero-length Read Response.
	if len(up) > 0 && (len(up[0].payload) == 0 || up[0].op == rdmap.OpReadRequest) {
		if up[0].op == rdmap.OpReadRequest {
			require.Equal(t, uint32(0), binary.BigEndian.Uint32(up[0].payload[12:16]), "Read RTR size")
			// Its response is the server's first Read Response; the
			// server's own first message may go out before it.
			i := slices.IndexFunc(down, func(m message) bool { return m.op == rdmap.OpReadResponse })
			require.GreaterOrEqual(t, i, 0, "no Read Response to the Read RTR")
			require.Empty(t, down[i].payload)
			down = slices.Delete(slices.Clone(down), i, i+1)
		}
		up = up[1:]
	}
	require.Zero(t, len(up)%3, "client messages: 3 per iteration")
	iters := len(up) / 3
	require.Len(t, down, 4*iters, "server messages: 4 per iteration")
	start := byte('A')
	ping := make([]byte, size)
	for i := 0; i < iters; i++ {
		start = FillPing(ping, i, start)
		srcAdv, rresp, sinkAdv := up[3*i], up[3*i+1], up[3*i+2]
		rreq, go1, write, go2 := down[4*i], down[4*i+1], down[4*i+2], down[4*i+3]

		require.Equal(t, rdmap.OpSend, srcAdv.op, "iteration %d", i)
		src, err := ParseInfo(srcAdv.payload)
		require.NoError(t, err)
		require.Equal(t, uint32(size), src.Size)

		require.Equal(t, rdmap.OpReadRequest, rreq.op)
		require.Len(t, rreq.payload, 28)
		sinkSTag := binary.BigEndian.Uint32(rreq.payload[0:4])
		require.Equal(t, uint32(size), binary.BigEndian.Uint32(rreq.payload[12:16]), "Read size")
		require.Equal(t, src.RKey, binary.BigEndian.Uint32(rreq.payload[16:20]), "Read source STag = advertised rkey")
		require.Equal(t, src.Addr, binary.BigEndian.Uint64(rreq.payload[20:28]), "Read source TO = advertised address")

		require.Equal(t, rdmap.OpReadResponse, rresp.op)
		require.Equal(t, sinkSTag, rresp.stag)
		require.Equal(t, ping, rresp.payload, "iteration %d: the ping as rping.c writes it", i)

		require.Equal(t, rdmap.OpSend, go1.op)
		require.Len(t, go1.payload, InfoLen)

		require.Equal(t, rdmap.OpSend, sinkAdv.op)
		sink, err := ParseInfo(sinkAdv.payload)
		require.NoError(t, err)
		require.Equal(t, uint32(size), sink.Size)

		require.Equal(t, rdmap.OpWrite, write.op)
		require.Equal(t, sink.RKey, write.stag)
		require.Equal(t, sink.Addr, write.to)
		require.Equal(t, ping, write.payload, "iteration %d: the server echoes strlen+1 bytes", i)

		require.Equal(t, rdmap.OpSend, go2.op)
		require.Len(t, go2.payload, InfoLen)
	}
	return iters
}

// TestRping_SiwCaptureGolden checks our reading of rping against a real
// conversation between two siw rping processes (rping -C 10 -S 64 on
// loopback): the advertisement layout, the operation sequence and the
// ping bytes FillPing produces, byte for byte.
func TestRping_SiwCaptureGolden(t *testing.T) {
	conns, err := capture.ReadFile("../../internal/capture/testdata/rping-lo.pcap")
	require.NoError(t, err)
	var c *capture.Conn
	for _, x := range conns {
		if x.Server.Port() == Port {
			c = x
		}
	}
	require.NotNil(t, c, "no connection to port 7174 in the capture")
	req, up := parseStream(t, c.Up.Data)
	rep, down := parseStream(t, c.Down.Data)
	require.Equal(t, mpa.KindRequest, req.Kind)
	require.Equal(t, mpa.KindReply, rep.Kind)
	// rping over siw: IRD = ORD = 1, no private data beyond the block.
	require.Equal(t, mpa.IRDORD{IRD: 1, ORD: 1}, req.IRDORD)
	require.Empty(t, req.PrivateData)
	require.Equal(t, 10, checkRpingConversation(t, up, down, 64))
}

// recorder is a conn.Tap keeping the bytes each way.
type recorder struct {
	mu       sync.Mutex
	sent     bytes.Buffer
	received bytes.Buffer
}

func (r *recorder) Wrap(c net.Conn) net.Conn { return &recordedConn{Conn: c, r: r} }

func (r *recorder) streams() (sent, received []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.sent.Bytes()), bytes.Clone(r.received.Bytes())
}

type recordedConn struct {
	net.Conn
	r *recorder
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.received.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

func (c *recordedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.r.mu.Lock()
	c.r.sent.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

// TestRping_WireSequence records our client's connection to our server and
// holds it to the same checks as the siw capture, for several sizes and
// MPA variants.
func TestRping_WireSequence(t *testing.T) {
	cases := []struct {
		name   string
		size   int
		client []conn.Option
		rtr    rdmap.Opcode // the client's first message, if an RTR
	}{
		{"siw-like", 64, nil, 0xff},
		{"crc", 1000, []conn.Option{conn.WithCRC(conn.CRCRequired)}, 0xff},
		{"p2p-read", 64, []conn.Option{conn.WithP2P(conn.RTRRead)}, rdmap.OpReadRequest},
		{"p2p-write", 64, []conn.Option{conn.WithP2P(conn.RTRWrite)}, rdmap.OpWrite},
		{"p2p-send", 64, []conn.Option{conn.WithP2P(conn.RTRSend)}, rdmap.OpSend},
		{"rev1", 200, []conn.Option{conn.WithMPARevision(1)}, 0xff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := startServer(t, 1000, nil)
			rec := &recorder{}
			_, stderr, err := runClient(t, addr, tc.size, 5, nil, append(tc.client, conn.WithTap(rec))...)
			require.NoError(t, err, stderr)
			require.NoError(t, srv.wait(t))
			sent, received := rec.streams()
			req, up := parseStream(t, sent)
			_, down := parseStream(t, received)
			require.NotEmpty(t, up)
			if tc.rtr != 0xff {
				require.Equal(t, tc.rtr, up[0].op, "RTR")
			} else {
				require.Len(t, up[0].payload, InfoLen, "no RTR: the first message is the advertisement")
			}
			if tc.name != "rev1" {
				require.Equal(t, mpa.IRDORD{IRD: 1, ORD: 1}, mpa.IRDORD{IRD: req.IRDORD.IRD, ORD: req.IRDORD.ORD})
			}
			require.Equal(t, 5, checkRpingConversation(t, up, down, tc.size))
		})
	}
}
