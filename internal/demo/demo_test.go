package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/dissect/tsharktest"
	"github.com/iwarp-go/iwarp-go/internal/rping"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

func TestDemo_RunsAndVerifies(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), Config{Out: &out}))
	o := out.String()
	for _, want := range []string{
		"connected 127.0.0.1:",
		// Two iwarp-go peers: revision 2 with RFC 6581 negotiation, CRC,
		// and peer-to-peer mode with a Write RTR by default.
		"negotiated: MPA rev 2 enhanced, CRC32c on, no markers, peer-to-peer with Write RTR, IRD 16 / ORD 16",
		"send   client -> server    4.0 KiB  received intact by the server",
		"write  client -> server      1 MiB  every byte checked by the server",
		"read   server -> client      1 MiB  every byte checked by the client",
		"rdma write  64 MiB in ",
		"rdma read   64 MiB in ",
		"latency: 2000 round trips",
		"durable write: a pmemsink region, ",
		"  write + flush  client -> sink      4 KiB  flush-extension, ",
		"OK: 130.0 MiB moved, every byte verified",
	} {
		require.Contains(t, o, want)
	}
}

func demoWithHooks(t *testing.T, h hooks) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, Config{Out: &out, hooks: h})
	return out.String(), err
}

// The server's check of the written bytes can fail, and the demo says so.
func TestDemo_DetectsWrongWrittenBytes(t *testing.T) {
	out, err := demoWithHooks(t, hooks{beforeVerify: func(b []byte) { b[12345] ^= 0x20 }})
	require.Error(t, err)
	require.Contains(t, err.Error(), "rdma write: the server reports: byte 12345 of 1048576 is")
	require.NotContains(t, out, "OK:")
}

// The client's check of the bytes read back can fail too.
func TestDemo_DetectsWrongReadBytes(t *testing.T) {
	out, err := demoWithHooks(t, hooks{afterFill: func(b []byte) { b[len(b)-1]++ }})
	require.Error(t, err)
	require.Contains(t, err.Error(), "rdma read: byte 1048575 of 1048576 is")
	require.NotContains(t, out, "OK:")
}

func TestPattern(t *testing.T) {
	a, b := make([]byte, 4096), make([]byte, 4096)
	pattern(a, 1)
	pattern(b, 2)
	require.NotEqual(t, a, b)
	require.NoError(t, checkPattern(a, 1))
	require.Error(t, checkPattern(a, 2))
	// No short period: a shifted copy does not match.
	require.NotEqual(t, a[:2048], a[1:2049])
	require.Greater(t, strings.Count(string(a), "\x00"), 0, "all byte values occur")
}

// --pcap records the client's connection; the capture decodes into the
// demo's conversation with every CRC good.
func TestDemo_Pcap(t *testing.T) {
	path := t.TempDir() + "/demo.pcap"
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), Config{Pcap: path, Out: &out}))
	require.Contains(t, out.String(), "recording the client's side into "+path)
	require.Contains(t, out.String(), "OK: 6.0 MiB moved, every byte verified")

	d, err := dissect.DecodeFile(path)
	require.NoError(t, err)
	require.Len(t, d.Streams, 1)
	s := d.Streams[0]
	require.Equal(t, dissect.StateEstablished, s.State)
	require.Empty(t, s.Notes)
	payload := map[[2]int]int{} // (direction, opcode) → bytes
	for _, f := range s.PDUs {
		require.Equal(t, dissect.CRCGood, f.CRC, "FPDU at offset %d", f.Offset)
		require.Empty(t, f.Error)
		payload[[2]int{int(f.Dir), int(f.Opcode)}] += f.PayloadLen
	}
	const mib = 1 << 20
	up, down := int(dissect.Up), int(dissect.Down)
	require.Equal(t, (1+demoBulkRecorded)*mib, payload[[2]int{up, int(rdmap.OpWrite)}], "Writes")
	require.Equal(t, (1+demoBulkRecorded)*mib+8, payload[[2]int{down, int(rdmap.OpReadResponse)}], "Read Responses, the 8-byte fence included")
	// hello + Written ×2 + pings + goodbye, each with its 8-byte header.
	require.Equal(t, 8+demoHello+2*8+demoPingsRecorded*8+8, payload[[2]int{up, int(rdmap.OpSend)}], "client Sends")
	require.Equal(t, 8+rping.InfoLen+2*8+demoPingsRecorded*8, payload[[2]int{down, int(rdmap.OpSend)}], "server Sends")

	// Wireshark reads the same capture: nothing malformed, every FPDU's CRC
	// good (skipped without tshark, required in CI).
	if !tsharktest.Available(t) {
		return
	}
	require.Empty(t, tsharktest.Fields(t, path, "_ws.malformed", "frame.number"), "frames tshark finds malformed")
	fpdus := 0
	for _, p := range tsharktest.PDUs(t, path) {
		crc, ok := p.MPA["iwarp_mpa.crc_check"]
		if !ok {
			continue // the MPA Request and Reply
		}
		fpdus++
		require.Contains(t, crc.ShowName, "Good CRC32", "frame %d", p.Frame)
	}
	require.Equal(t, len(s.PDUs), fpdus, "tshark finds every FPDU")
}

func TestDemo_PcapUnwritable(t *testing.T) {
	var out bytes.Buffer
	err := Run(context.Background(), Config{Pcap: t.TempDir() + "/no/such/dir/x.pcap", Out: &out})
	require.ErrorContains(t, err, "recording the capture: open ")
}
