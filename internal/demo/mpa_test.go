package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The MPA walk-through runs the real MPA code end to end; its account must
// report each outcome it claims.
func TestMPADemo_RunsAndReports(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, MPA(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		`initiator → Request rev 2 flags C|E PD_Length 28 IRD 4 ORD 8 private data "hello from the initiator"`,
		`responder → Reply rev 2 flags C|E PD_Length 11 IRD 16 ORD 2 private data "welcome"`,
		"CRC32c on",
		"initiator may have 8 RDMA Reads outstanding",
		"responder 2 (min of its ORD 2",
		"responder must wait for the initiator's first FPDU before sending: true",
		"responder ← FPDU 2: ULPDU 4110, header STag 0x101, 4096 payload bytes",
		`initiator ← "thanks", CRC ok`,
		"Terminate with code 0x2002",
		"1312 bytes on the wire, 12 of them markers",
		"payload intact true",
		`initiator: connection refused by the peer, private data "not today"`,
	} {
		require.Contains(t, s, want)
	}
	require.Equal(t, 3, strings.Count(s, "placed in its buffer, CRC ok"), "three FPDUs checked on the responder")
}

func TestMPADemo_CancelledContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	require.Error(t, MPA(ctx, &out))
}
