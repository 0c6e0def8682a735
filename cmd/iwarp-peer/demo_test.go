package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDemo_Command(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "demo")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "OK: 130.0 MiB moved, every byte verified")
	require.Empty(t, errb)

	code, _, errb = runCmd(context.Background(), "demo", "--pcap", t.TempDir()+"/no/such/dir/x.pcap")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "iwarp-peer demo: recording the capture: open ")

	code, out, errb = runCmd(context.Background(), "mpa-demo")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, `initiator: connection refused by the peer, private data "not today"`)
}
