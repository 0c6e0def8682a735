package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/stretchr/testify/require"
)

var siwRping = filepath.Join("..", "..", "internal", "capture", "testdata", "rping-lo.pcap")

func TestDecode_Text(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"decode", siwRping}, &out, &errb), errb.String())
	want, err := dissect.DecodeFile(siwRping)
	require.NoError(t, err)
	var text bytes.Buffer
	require.NoError(t, want.WriteText(&text))
	require.Equal(t, text.String(), out.String())
	require.Contains(t, out.String(), "stream 0: 10.0.2.15:48856 → 10.0.2.15:7174, first frame 1: established")
	require.Contains(t, out.String(), "frame 9          down RDMA Read Request L QN 1 MSN 1 MO 0")
	require.Empty(t, errb.String())
}

// --json prints one JSON document, before or after the file name.
func TestDecode_JSON(t *testing.T) {
	for _, args := range [][]string{{"decode", "--json", siwRping}, {"decode", siwRping, "--json"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run(args, &out, &errb), errb.String())
		var doc struct {
			Streams []struct {
				State string `json:"state"`
				FPDUs []struct {
					Op     string `json:"op"`
					Frames []int  `json:"frames"`
				} `json:"fpdus"`
			} `json:"streams"`
		}
		dec := json.NewDecoder(&out)
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
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"decode", filepath.Join(t.TempDir(), "missing.pcap")}, &out, &errb))
	require.Contains(t, errb.String(), "iwarp-peer decode:")
	require.Contains(t, errb.String(), "unreadable capture")

	junk := filepath.Join(t.TempDir(), "junk.pcap")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a capture"), 0o644))
	errb.Reset()
	require.Equal(t, 1, run([]string{"decode", junk}, &out, &errb))
	require.Contains(t, errb.String(), "not a pcap or pcapng file")

	for _, args := range [][]string{{"decode"}, {"decode", "a.pcap", "b.pcap"}, {"decode", "--bogus", "a.pcap"}} {
		errb.Reset()
		require.Equal(t, 2, run(args, &out, &errb), "%v", args)
		require.Contains(t, errb.String(), "usage: iwarp-peer decode FILE [--json]")
	}
	require.Empty(t, out.String())
}
