package perftest

import (
	"encoding/binary"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Two waits of perftest read memory that the peer's RDMA Writes fill while
// they fill it: write_lat spins on the last byte of its buffer, and a
// send_bw client reads the credit word the receiver writes. Both regions
// are registered as watched (conn.Watched), whose placements are
// synchronized with MR.LoadUint64.

func registerWatched(pd *conn.PD, buf []byte, access conn.Access) (*conn.MR, error) {
	return pd.Register(buf, access, conn.Watched())
}

// loadByte returns byte off of a watched region.
func loadByte(mr *conn.MR, off int) byte {
	var w [8]byte
	binary.NativeEndian.PutUint64(w[:], mr.LoadUint64(off&^7))
	return w[off&7]
}

// loadCredit returns the credit word at off (8-aligned): the receiver
// writes its count as a little-endian uint32, perftest's host order on
// x86-64 and arm64.
func loadCredit(mr *conn.MR, off int) uint32 {
	var w [8]byte
	binary.NativeEndian.PutUint64(w[:], mr.LoadUint64(off))
	return binary.LittleEndian.Uint32(w[:4])
}
