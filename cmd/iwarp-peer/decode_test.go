package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/dissect/tsharktest"
	"github.com/stretchr/testify/require"
)

var siwRping = filepath.Join("..", "..", "internal", "capture", "testdata", "rping-lo.pcap")

func TestDecode_Text(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "decode", siwRping)
	require.Equal(t, 0, code, errb)
	want, err := dissect.DecodeFile(siwRping)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, want.WriteText(&text))
	require.Equal(t, text.String(), out)
	require.Contains(t, out, "stream 0: 10.0.2.15:48856 → 10.0.2.15:7174, first frame 1: established")
	require.Contains(t, out, "frame 9          down RDMA Read Request L QN 1 MSN 1 MO 0")
	require.Empty(t, errb)
}

// --json prints one JSON document, before or after the file name.
func TestDecode_JSON(t *testing.T) {
	for _, args := range [][]string{{"decode", "--json", siwRping}, {"decode", siwRping, "--json"}} {
		code, out, errb := runCmd(context.Background(), args...)
		require.Equal(t, 0, code, errb)
		var doc struct {
			Streams []struct {
				State string `json:"state"`
				FPDUs []struct {
					Op     string `json:"op"`
					Frames []int  `json:"frames"`
				} `json:"fpdus"`
			} `json:"streams"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		require.NoError(t, dec.Decode(&doc))
		require.False(t, dec.More(), "exactly one document")
		require.Len(t, doc.Streams, 1)
		require.Equal(t, "established", doc.Streams[0].State)
		require.Len(t, doc.Streams[0].FPDUs, 70)
		require.Equal(t, "Send", doc.Streams[0].FPDUs[0].Op)
		require.Equal(t, []int{8}, doc.Streams[0].FPDUs[0].Frames)
	}
}

// An unreadable file exits non-zero with a message; a command-line mistake
// prints the usage.
func TestDecode_Errors(t *testing.T) {
	ctx := context.Background()
	code, out, errb := runCmd(ctx, "decode", filepath.Join(t.TempDir(), "missing.pcap"))
	require.Equal(t, 1, code)
	require.Contains(t, errb, "iwarp-peer decode:")
	require.Contains(t, errb, "unreadable capture")
	require.Empty(t, out)

	junk := filepath.Join(t.TempDir(), "junk.pcap")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a capture"), 0o644))
	code, out, errb = runCmd(ctx, "decode", junk)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "not a pcap or pcapng file")
	require.Empty(t, out)

	for _, args := range [][]string{{"decode"}, {"decode", "a.pcap", "b.pcap"}, {"decode", "--bogus", "a.pcap"}} {
		code, out, errb = runCmd(ctx, args...)
		require.Equal(t, 2, code, "%v", args)
		require.Contains(t, errb, "usage: iwarp-peer decode FILE [--json]")
		require.Empty(t, out)
	}
}

// A capture cut mid-record, as a tcpdump killed while writing leaves it,
// decodes up to the cut, says where it stops, and exits 0.
func TestDecode_CutCapture(t *testing.T) {
	b, err := os.ReadFile(siwRping)
	require.NoError(t, err)
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	require.NoError(t, os.WriteFile(cut, b[:len(b)-30], 0o644))
	code, out, errb := runCmd(context.Background(), "decode", cut)
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "stream 0: 10.0.2.15:48856 → 10.0.2.15:7174, first frame 1: established")
	require.Regexp(t, `the capture file is cut short: it ends inside the record of frame \d+, at file offset \d+ \(\d+ of its \d+ octets\); frames 1 to \d+ are decoded\n$`, out)

	code, out, errb = runCmd(context.Background(), "decode", "--json", cut)
	require.Equal(t, 0, code, errb)
	var doc struct {
		Cut *struct {
			Frame, Offset, Have, Want int
		} `json:"cut"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.NotNil(t, doc.Cut)
	require.Equal(t, len(b)-30-doc.Cut.Offset, doc.Cut.Have)
}

// --tshark prints the tshark command that dissects the file as decode
// does, quoted for a shell. On a capture with 8-byte Sends (the demo's
// pings) it finds nothing malformed, where tshark without the setting
// that turns the RPC-over-RDMA heuristic off reports malformed RPCoRDMA.
func TestDecode_Tshark(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir")
	require.NoError(t, os.Mkdir(dir, 0o755))
	file := filepath.Join(dir, "it's.pcap")
	code, _, errb := runCmd(context.Background(), "demo", "--pcap", file)
	require.Equal(t, 0, code, errb)
	code, out, errb := runCmd(context.Background(), "decode", "--tshark", file)
	require.Equal(t, 0, code, errb)
	quoted := "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
	require.Equal(t, "tshark -r "+quoted+" -o tcp.desegment_tcp_streams:TRUE -o tcp.try_heuristic_first:TRUE "+
		"--enable-heuristic iwarp_mpa_tcp --disable-heuristic rpcrdma_iwarp\n", out)
	if !tsharktest.Available(t) {
		return
	}
	malformed := func(command string) string {
		got, err := exec.Command("sh", "-c", command+" -Y _ws.malformed -T fields -e _ws.malformed").Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(got))
	}
	command := strings.TrimSpace(out)
	require.Empty(t, malformed(command), "frames tshark finds malformed")
	require.Contains(t, malformed(strings.TrimSuffix(command, " --disable-heuristic rpcrdma_iwarp")), "RPCoRDMA",
		"without the setting, tshark misreads the 8-byte Sends")
}
