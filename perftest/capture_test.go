package perftest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// The captures in testdata/ are siw↔siw runs of Debian 12's perftest
// (4.5+0.17, version 6.06) in the siw lab, one per test: 64-byte messages,
// -n 200, on one port (7190–7195), CRC off. Each holds the comm connection
// and then the test connection.

// wireMsg is one RDMAP message of a capture (every message of these runs
// fits one FPDU).
type wireMsg struct {
	op      rdmap.Opcode
	stag    uint32 // tagged
	to      uint64 // tagged
	payload []byte // Send payload, tagged payload, or a Read Request's 28 bytes
	frame   int    // the capture frame that completes it
}

// capConn is one direction pair of a captured connection.
type capConn struct {
	up, down []wireMsg // client→server, server→client
	padDirty int       // FPDUs whose pad bytes were not zero
}

// readCapture splits testdata/<name>.pcap into its comm and test
// connections. The FPDUs go through mpa.Reader, which must take siw's
// stale pad bytes.
func readCapture(t testing.TB, name string) (comm, test capConn) {
	t.Helper()
	conns, err := capture.ReadFile(filepath.Join("testdata", name+".pcap"))
	require.NoError(t, err)
	require.Len(t, conns, 2, "the comm connection and one test connection")
	require.Equal(t, conns[0].Server, conns[1].Server, "one port carries both")
	return parseConn(t, conns[0]), parseConn(t, conns[1])
}

func parseConn(t testing.TB, c *capture.Conn) capConn {
	t.Helper()
	var out capConn
	out.up, out.padDirty = parseDir(t, c.Up)
	down, dirty := parseDir(t, c.Down)
	out.down = down
	out.padDirty += dirty
	return out
}

func parseDir(t testing.TB, st *capture.Stream) ([]wireMsg, int) {
	t.Helper()
	b := st.Data
	_, n, err := mpa.ParseFrame(b)
	require.NoError(t, err)
	b = b[n:]
	off := n
	dirty := 0
	// Count the FPDUs with stale pad bytes independently of the Reader.
	for rest := b; len(rest) >= 2; {
		u := int(binary.BigEndian.Uint16(rest))
		pad := (4 - (2+u)%4) % 4
		if !bytes.Equal(rest[2+u:2+u+pad], make([]byte, pad)) {
			dirty++
		}
		rest = rest[2+u+pad+4:]
	}
	r := mpa.NewReader(bytes.NewReader(b), mpa.ReaderConfig{})
	var msgs []wireMsg
	buf := make([]byte, 70000)
	for {
		u, err := r.ReadFPDU(buf)
		if errors.Is(err, io.EOF) {
			return msgs, dirty
		}
		require.NoError(t, err)
		ctl := ddp.Control(u[0])
		require.True(t, ctl.Last(), "one FPDU per message in these runs")
		off += (2+len(u)+3)&^3 + 4
		m := wireMsg{op: rdmap.ControlOpcode(u[1]), frame: st.FrameAt(off - 1)}
		if ctl.Tagged() {
			h, ok := ddp.ParseTagged(u)
			require.True(t, ok)
			m.stag, m.to = h.STag(), h.TO()
			m.payload = bytes.Clone(u[14:])
		} else {
			m.payload = bytes.Clone(u[18:])
		}
		msgs = append(msgs, m)
	}
}

// sends returns the payloads of the Sends in msgs.
func sends(msgs []wireMsg) [][]byte {
	var out [][]byte
	for _, m := range msgs {
		if m.op == rdmap.OpSend {
			out = append(out, m.payload)
		}
	}
	return out
}

var captureTests = []struct {
	test Test
	name string
}{
	{WriteBW, "pt-siw-write_bw-64"}, {ReadBW, "pt-siw-read_bw-64"}, {SendBW, "pt-siw-send_bw-64"},
	{WriteLat, "pt-siw-write_lat-64"}, {ReadLat, "pt-siw-read_lat-64"}, {SendLat, "pt-siw-send_lat-64"},
}

// captureParams are the settings of the captured runs.
func captureParams(test Test, role Role) Params {
	return Params{Test: test, Role: role, Size: 64, CycleBuffer: 4096, CacheLineSize: 64, MTU: mtu1024}
}

// firstFrame tells which direction of the test connection carries its
// first FPDU: "up" (client) or "down" (server), by capture frame number.
func firstFrame(t *testing.T, name string) string {
	t.Helper()
	conns, err := capture.ReadFile(filepath.Join("testdata", name+".pcap"))
	require.NoError(t, err)
	c := conns[1]
	frame := func(s *capture.Stream) int {
		_, n, err := mpa.ParseFrame(s.Data)
		require.NoError(t, err)
		if f := s.FrameAt(n); f != 0 {
			return f
		}
		return 1 << 30
	}
	if frame(c.Up) < frame(c.Down) {
		return "up"
	}
	return "down"
}
