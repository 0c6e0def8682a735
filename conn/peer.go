package conn

import "bytes"

// iwarp-go peers recognise each other by a trailer at the end of the MPA
// private data. A trailer, not a header: an application on a peer that is
// not iwarp-go (rdma-core over siw) reads its private data from the
// start, and the few bytes after it do not disturb it. The trailer is
// removed before the private data reaches the application.
//
//	"iWGo" | version (1) | flags | 2 reserved bytes
var peerMagic = [4]byte{'i', 'W', 'G', 'o'}

const (
	peerTrailerLen     = 8
	peerTrailerVersion = 1
)

func appendPeerTrailer(pd []byte) []byte {
	out := make([]byte, 0, len(pd)+peerTrailerLen)
	out = append(out, pd...)
	out = append(out, peerMagic[:]...)
	return append(out, peerTrailerVersion, 0, 0, 0)
}

// splitPeerTrailer reports whether pd ends with an iwarp-go trailer and
// returns the application's part.
func splitPeerTrailer(pd []byte) (app []byte, isGo bool) {
	if len(pd) < peerTrailerLen {
		return pd, false
	}
	t := pd[len(pd)-peerTrailerLen:]
	if !bytes.Equal(t[:4], peerMagic[:]) || t[4] < 1 {
		return pd, false
	}
	return pd[:len(pd)-peerTrailerLen], true
}
