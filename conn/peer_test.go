package conn

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// The trailer is the one negotiation of every extension: an extension is
// used when both sides declare it, a flag this side does not know is
// ignored, and no trailer means none.
func TestPeerTrailer_Extensions(t *testing.T) {
	own := appendPeerTrailer([]byte("app"))
	app, peer := splitPeerTrailer(own)
	require.Equal(t, []byte("app"), app)
	require.True(t, peer.isGo)
	require.Equal(t, rdmap.ExtFlush|rdmap.ExtRFC7306, peer.extensions())

	for _, tc := range []struct {
		flags byte
		want  rdmap.Extensions
	}{
		{0x00, 0},
		{0x01, rdmap.ExtFlush}, // an iwarp-go peer from before RFC 7306
		{0x02, rdmap.ExtRFC7306},
		{0xff, rdmap.ExtFlush | rdmap.ExtRFC7306},
	} {
		b := append([]byte("x"), peerMagic[:]...)
		b = append(b, peerTrailerVersion, tc.flags, 0, 0)
		_, peer := splitPeerTrailer(b)
		require.Equal(t, tc.want, peer.extensions(), "flags %#x", tc.flags)
	}
	_, peer = splitPeerTrailer([]byte("no trailer at all"))
	require.Zero(t, peer.extensions())
}
