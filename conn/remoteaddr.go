package conn

import (
	"encoding/binary"
	"fmt"
)

// RemoteAddrLen is the length of a RemoteAddr's wire encoding.
const RemoteAddrLen = 12

// AppendRemoteAddr appends the wire encoding of a: the STag (4 octets) then
// the tagged offset (8 octets), both big-endian like every field of the
// RDMAP and DDP headers. Programs exchange it in a Send or in MPA private
// data to let a peer address their memory.
func AppendRemoteAddr(b []byte, a RemoteAddr) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(a.STag))
	return binary.BigEndian.AppendUint64(b, a.TO)
}

// ParseRemoteAddr decodes the RemoteAddr at the start of b (see
// AppendRemoteAddr) and returns it with the octets that follow.
func ParseRemoteAddr(b []byte) (RemoteAddr, []byte, error) {
	if len(b) < RemoteAddrLen {
		return RemoteAddr{}, b, fmt.Errorf("iwarp: remote address: %d octets, want %d", len(b), RemoteAddrLen)
	}
	a := RemoteAddr{STag: STag(binary.BigEndian.Uint32(b)), TO: binary.BigEndian.Uint64(b[4:])}
	return a, b[RemoteAddrLen:], nil
}

// String formats a as STag@TO.
func (a RemoteAddr) String() string { return fmt.Sprintf("%v@%#x", a.STag, a.TO) }
