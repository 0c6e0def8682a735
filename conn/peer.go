package conn

import (
	"bytes"

	"github.com/iwarp-go/iwarp-go/rdmap"
)

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

// peerFlags are what this side declares in its trailer: the extensions it
// accepts (rdmap.Extensions: the Flush extension,
// docs/rfc-notes/flush-extension.md, and RFC 7306, docs/rfc-notes/rfc7306.md).
const peerFlags = byte(rdmap.ExtFlush | rdmap.ExtRFC7306)

func appendPeerTrailer(pd []byte) []byte {
	out := make([]byte, 0, len(pd)+peerTrailerLen)
	out = append(out, pd...)
	out = append(out, peerMagic[:]...)
	return append(out, peerTrailerVersion, peerFlags, 0, 0)
}

// peerInfo is what the peer's trailer said.
type peerInfo struct {
	isGo  bool
	flags byte
}

// extensions returns the extensions both sides declared: this side
// declares peerFlags in its trailer, and a peer's trailer comes back only
// when this side sent one. Bits this side does not know are dropped.
func (p peerInfo) extensions() rdmap.Extensions {
	if !p.isGo {
		return 0
	}
	return rdmap.Extensions(p.flags & peerFlags)
}

// splitPeerTrailer reports whether pd ends with an iwarp-go trailer and
// returns the application's part.
func splitPeerTrailer(pd []byte) (app []byte, peer peerInfo) {
	if len(pd) < peerTrailerLen {
		return pd, peerInfo{}
	}
	t := pd[len(pd)-peerTrailerLen:]
	if !bytes.Equal(t[:4], peerMagic[:]) || t[4] < 1 {
		return pd, peerInfo{}
	}
	return pd[:len(pd)-peerTrailerLen], peerInfo{isGo: true, flags: t[5]}
}
