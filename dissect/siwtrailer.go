package dissect

import (
	"encoding/binary"
	"hash/crc32"
)

// SiwTrailer is the trailer buffer of a Linux soft-iWARP receiver (siw,
// drivers/infiniband/sw/siw: struct mpa_trailer, four pad octets then the
// CRC field), for explaining the CRC errors siw reports.
//
// siw reads an FPDU's pad and CRC field into the buffer's last pad+4
// octets. Since Linux 6.1 (commit 754209850df8, "RDMA/siw: Always consume
// all skbuf data in sk_data_ready() upcall", also backported to stable
// kernels) it takes whatever part of them a socket buffer holds, and
// copies the next part to the same start again: when the field arrives in
// two socket buffers, the second part overwrites the first, the octets
// after it keep what the previous FPDU left, and siw terminates the
// connection with an MPA CRC error (0/1/0x02 in its Terminate) although
// the CRC on the wire is right. Read models that copy.
type SiwTrailer [8]byte

// Read copies an FPDU's pad and CRC field, trailer (pad+4 octets, pad
// at most 3), into t as siw does when the first split octets arrive in one
// socket buffer and the rest in the next; split 0 (or len(trailer)) is a
// field that arrives whole.
func (t *SiwTrailer) Read(trailer []byte, split int) {
	pad := len(trailer) - 4
	if pad < 0 || pad > 3 {
		return
	}
	b := t[4-pad:]
	if split <= 0 || split >= len(trailer) {
		copy(b, trailer)
		return
	}
	copy(b, trailer[:split])
	copy(b, trailer[split:])
}

// CRC returns the CRC field siw compares, in wire order.
func (t *SiwTrailer) CRC() [4]byte { return [4]byte(t[4:]) }

// Pad returns the n pad octets siw adds to its CRC.
func (t *SiwTrailer) Pad(n int) []byte { return t[4-n : 4] }

// siwCRCLog returns the two numbers of siw's log line for a CRC error,
// "siw: crc error. in: %08x, own %08x", as a little-endian host prints
// them: the field siw read and the CRC it computed over fpdu (the FPDU
// up to its pad) and the pad octets it read.
func siwCRCLog(t *SiwTrailer, fpdu []byte, pad int) (in, own uint32) {
	c := t.CRC()
	own = crc32.Update(crc32.Checksum(fpdu, castagnoli), castagnoli, t.Pad(pad))
	return binary.LittleEndian.Uint32(c[:]), own
}
