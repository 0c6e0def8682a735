package perftest

import (
	"encoding/binary"
	"fmt"
)

// Dest is perftest's struct pingpong_dest: what one side tells the other
// about a queue pair in every handshake. Over iWARP with rdma_cm only RKey
// and VAddr are used (the target of RDMA Writes and Reads, or in send_bw
// the sender's credit word); the rest is printed.
type Dest struct {
	LID      uint32
	OutReads uint32 // RDMA Reads this side takes in flight
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	// TailMarkersVAddr exists from perftest 6.29 on (data validation).
	TailMarkersVAddr uint64
	GID              [16]byte
	SRQN             uint32
	GIDIndex         uint32
}

// Sizes of struct pingpong_dest on x86-64: 6.06 up to 6.28, and 6.29.
const (
	destLen606 = 56
	destLen629 = 64
	// maxDestLen is the longest dest message of any version.
	maxDestLen = destLen629
)

// AppendDest appends d encoded as a peer of version v reads it: 32-bit
// fields and the address big-endian (htobe32, htobe64), the GID raw.
// perftest leaves the 4 bytes of padding after RKey uninitialised; they
// are zero here.
func AppendDest(b []byte, d *Dest, v Version) []byte {
	n := v.destLen()
	var m [maxDestLen]byte
	be := binary.BigEndian
	be.PutUint32(m[0:], d.LID)
	be.PutUint32(m[4:], d.OutReads)
	be.PutUint32(m[8:], d.QPN)
	be.PutUint32(m[12:], d.PSN)
	be.PutUint32(m[16:], d.RKey)
	be.PutUint64(m[24:], d.VAddr)
	gid := 32
	if n == destLen629 {
		be.PutUint64(m[32:], d.TailMarkersVAddr)
		gid = 40
	}
	copy(m[gid:], d.GID[:])
	be.PutUint32(m[gid+16:], d.SRQN)
	be.PutUint32(m[gid+20:], d.GIDIndex)
	return append(b, m[:n]...)
}

// ParseDest decodes a dest message sent by a peer of version v. The
// padding is ignored (perftest sends stack garbage there).
func ParseDest(b []byte, v Version) (Dest, error) {
	n := v.destLen()
	if len(b) != n {
		return Dest{}, fmt.Errorf("%w (a perftest %s peer's struct pingpong_dest)", msgLenError("handshake", len(b), n), string(v))
	}
	be := binary.BigEndian
	d := Dest{
		LID:      be.Uint32(b[0:]),
		OutReads: be.Uint32(b[4:]),
		QPN:      be.Uint32(b[8:]),
		PSN:      be.Uint32(b[12:]),
		RKey:     be.Uint32(b[16:]),
		VAddr:    be.Uint64(b[24:]),
	}
	gid := 32
	if n == destLen629 {
		d.TailMarkersVAddr = be.Uint64(b[32:])
		gid = 40
	}
	copy(d.GID[:], b[gid:gid+16])
	d.SRQN = be.Uint32(b[gid+16:])
	d.GIDIndex = be.Uint32(b[gid+20:])
	return d, nil
}
