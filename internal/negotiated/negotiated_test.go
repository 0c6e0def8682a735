package negotiated

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/mpa"
)

func TestDescribeAndFields(t *testing.T) {
	for _, c := range []struct {
		r             *mpa.Result
		prose, fields string
	}{
		{nil, "not connected", ""},
		{&mpa.Result{Revision: 2, IRDORDKnown: true, IRD: 1, ORD: 1, PeerIRD: 1, PeerORD: 1},
			"MPA rev 2 enhanced, CRC off, no markers, no peer-to-peer, IRD 1 / ORD 1 (peer IRD 1 / ORD 1)",
			" mpa_rev=2 enhanced=yes crc=off p2p=none"},
		{&mpa.Result{Revision: 2, IRDORDKnown: true, CRC: true, P2P: true, RTR: mpa.RTRWrite, IRD: 16, ORD: 16, PeerIRD: 16, PeerORD: 16},
			"MPA rev 2 enhanced, CRC32c on, no markers, peer-to-peer with Write RTR, IRD 16 / ORD 16 (peer IRD 16 / ORD 16)",
			" mpa_rev=2 enhanced=yes crc=on p2p=write"},
		{&mpa.Result{Revision: 2}, "MPA rev 2 (no Enhanced flag), CRC off, no markers, no peer-to-peer, no IRD/ORD exchange",
			" mpa_rev=2 enhanced=no crc=off p2p=none"},
		{&mpa.Result{Revision: 1, CRC: true, SendMarkers: true}, "MPA rev 1, CRC32c on, markers sent true received false, no peer-to-peer, no IRD/ORD exchange",
			" mpa_rev=1 enhanced=no crc=on p2p=none"},
	} {
		require.Equal(t, c.prose, Describe(c.r))
		require.Equal(t, c.fields, Fields(c.r))
	}
}
