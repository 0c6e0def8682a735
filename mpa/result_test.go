package mpa

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResult_String(t *testing.T) {
	r := &Result{Revision: 2, IRDORDKnown: true, CRC: true, P2P: true, RTR: RTRWrite, IRD: 16, ORD: 8, PeerIRD: 4, PeerORD: 2}
	require.Equal(t, "MPA rev 2 enhanced, CRC32c on, no markers, peer-to-peer with Write RTR, IRD 16 / ORD 8 (peer IRD 4 / ORD 2)", r.String())
	r1 := &Result{Revision: 1, RecvMarkers: true}
	require.Equal(t, "MPA rev 1, CRC off, markers sent false received true, no peer-to-peer, no IRD/ORD exchange", r1.String())
	require.Equal(t, "not connected", (*Result)(nil).String())
}
