package perftest

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// The test connections of the captured runs, against what this package
// does on them.

// capturedDests returns the client's and the server's dest of a capture (their
// first real handshakes).
func capturedDests(t *testing.T, comm capConn) (client, server Dest) {
	t.Helper()
	c, err := ParseDest(sends(comm.up)[6], OwnVersion)
	require.NoError(t, err)
	s, err := ParseDest(sends(comm.down)[6], OwnVersion)
	require.NoError(t, err)
	return c, s
}

// TestSiwPadBytesIgnored: siw sends stale, non-zero MPA pad bytes (here
// in the 2-byte MTU messages); mpa.Reader ignores them (RFC 5044 §4.1
// does not define their content on receipt), so every capture above
// parses.
func TestSiwPadBytesIgnored(t *testing.T) {
	for _, c := range captureTests {
		comm, _ := readCapture(t, c.name)
		assert.Positive(t, comm.padDirty, "%s: the capture has FPDUs with stale pad bytes", c.name)
		up := sends(comm.up)
		assert.Equal(t, []byte("3\x00"), up[3], "%s: the MTU message, behind dirty pad bytes", c.name)
	}
}

func TestWireWriteBWAddresses(t *testing.T) {
	comm, test := readCapture(t, "pt-siw-write_bw-64")
	_, srv := capturedDests(t, comm)
	require.Len(t, test.up, 200)
	require.Empty(t, test.down, "the server sends nothing on the test connection")
	for k, m := range test.up {
		require.Equal(t, rdmap.OpWrite, m.op)
		require.Equal(t, srv.RKey, m.stag)
		require.Equal(t, srv.VAddr+uint64(cycleOffset(uint64(k), 64, 4096, 64)), m.to, "Write %d walks the cycle buffer", k)
		require.Len(t, m.payload, 64)
	}
	assert.Equal(t, srv.VAddr, test.up[64].to, "64 cache lines fill the 4096-byte cycle buffer")
}

func TestWireReadBWAddresses(t *testing.T) {
	comm, test := readCapture(t, "pt-siw-read_bw-64")
	cli, srv := capturedDests(t, comm)
	var reqs, resps int
	for k, m := range test.up {
		require.Equal(t, rdmap.OpReadRequest, m.op)
		require.Len(t, m.payload, 28)
		sinkSTag, sinkTO := binary.BigEndian.Uint32(m.payload), binary.BigEndian.Uint64(m.payload[4:])
		size := binary.BigEndian.Uint32(m.payload[12:])
		srcSTag, srcTO := binary.BigEndian.Uint32(m.payload[16:]), binary.BigEndian.Uint64(m.payload[20:])
		off := uint64(cycleOffset(uint64(k), 64, 4096, 64))
		require.Equal(t, uint32(64), size)
		require.Equal(t, srv.RKey, srcSTag, "the source is the server's region")
		require.Equal(t, srv.VAddr+off, srcTO)
		require.Equal(t, cli.RKey, sinkSTag, "the client's one region")
		// perftest's client advertises the second half of its buffer
		// and reads into the first.
		require.Equal(t, cli.VAddr-4096+off, sinkTO)
		reqs++
	}
	for _, m := range test.down {
		require.Equal(t, rdmap.OpReadResponse, m.op)
		resps++
	}
	assert.Equal(t, 200, reqs)
	assert.Equal(t, 200, resps)
	assert.Equal(t, uint32(128), srv.OutReads, "siw's max_qp_rd_atom")
}

// TestWireSendBWCredits: the receiver's credit Writes carry its count of
// receives, little-endian, into the sender's credit word, at the points
// creditDue gives.
func TestWireSendBWCredits(t *testing.T) {
	comm, test := readCapture(t, "pt-siw-send_bw-64")
	cli, _ := capturedDests(t, comm)
	require.Len(t, sends(test.up), 200)
	var want []uint32
	for r := uint64(1); r <= 200; r++ {
		if creditDue(r, 200) { // RX depth min(512, -n 200)
			want = append(want, uint32(r))
		}
	}
	assert.Equal(t, []uint32{66, 132, 198, 200}, want)
	var got []uint32
	for _, m := range test.down {
		require.Equal(t, rdmap.OpWrite, m.op)
		require.Equal(t, cli.RKey, m.stag)
		require.Equal(t, cli.VAddr, m.to, "the client's credit word")
		require.Len(t, m.payload, 4)
		got = append(got, binary.LittleEndian.Uint32(m.payload))
	}
	assert.Equal(t, want, got)
	assert.NotZero(t, cli.VAddr%8, "perftest's credit words are 4-byte array elements")
}

// TestWireWriteLatSequence: the server writes first; then each side
// answers the other's Write with its own, whose last byte is its count;
// every other byte is zero (perftest zeroes the write_lat buffer).
func TestWireWriteLatSequence(t *testing.T) {
	comm, test := readCapture(t, "pt-siw-write_lat-64")
	cli, srv := capturedDests(t, comm)
	require.Len(t, test.up, 200)
	require.Len(t, test.down, 200)
	for dir, msgs := range [][]wireMsg{test.up, test.down} {
		to := srv
		if dir == 1 {
			to = cli
		}
		for k, m := range msgs {
			require.Equal(t, rdmap.OpWrite, m.op)
			require.Equal(t, to.RKey, m.stag)
			require.Equal(t, to.VAddr, m.to, "always the start of the peer's buffer")
			require.Len(t, m.payload, 64)
			require.Equal(t, byte(k+1), m.payload[63], "the count in the last byte")
			require.Equal(t, make([]byte, 63), m.payload[:63])
		}
	}
	first := firstFrame(t, "pt-siw-write_lat-64")
	assert.Equal(t, "down", first, "the server's Write is the first FPDU on the test connection")
}

func TestWireReadLatAndSendLat(t *testing.T) {
	comm, test := readCapture(t, "pt-siw-read_lat-64")
	_, srv := capturedDests(t, comm)
	require.Len(t, test.up, 200)
	for _, m := range test.up {
		require.Equal(t, rdmap.OpReadRequest, m.op)
		require.Equal(t, srv.VAddr, binary.BigEndian.Uint64(m.payload[20:]), "one address, every time")
	}
	_, test = readCapture(t, "pt-siw-send_lat-64")
	assert.Len(t, sends(test.up), 200)
	assert.Len(t, sends(test.down), 200)
	assert.Equal(t, "up", firstFrame(t, "pt-siw-send_lat-64"), "the client sends first")
}

// TestWireTestConnectionOpensAfterFifthMessage: the client opens the test
// connection once the fifth exchange (a handshake of zeros) is complete;
// a perftest server listens for it only then.
func TestWireTestConnectionOpensAfterFifthMessage(t *testing.T) {
	for _, c := range captureTests {
		conns, err := capture.ReadFile(filepath.Join("testdata", c.name+".pcap"))
		require.NoError(t, err)
		comm, _ := readCapture(t, c.name)
		var up, down []wireMsg
		for _, m := range comm.up {
			if m.op == rdmap.OpSend {
				up = append(up, m)
			}
		}
		for _, m := range comm.down {
			if m.op == rdmap.OpSend {
				down = append(down, m)
			}
		}
		syn := conns[1].FirstFrame
		assert.Greater(t, syn, down[4].frame, "%s: after the server's fifth message", c.name)
		assert.Less(t, syn, up[5].frame, "%s: before the client's sixth", c.name)
	}
}
