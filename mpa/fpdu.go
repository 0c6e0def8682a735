package mpa

import "hash/crc32"

// FPDU layout (RFC 5044 §4): a 2-byte big-endian ULPDU_Length, the ULPDU,
// zero padding to a multiple of 4 counted from the length field, and a
// 4-byte CRC field. With markers (§4.3) a 4-byte marker sits at every
// 512-octet boundary of the stream.
const (
	// MaxULPDU is the largest ULPDU a 16-bit length field can describe.
	MaxULPDU = 65535
	// MaxPeek is the most ULPDU bytes Reader.Peek returns at once; every
	// DDP/RDMAP header fits.
	MaxPeek = 256
	// MaxHeader is the most header bytes Writer.Begin copies.
	MaxHeader = 512

	lengthLen      = 2
	crcLen         = 4
	markerLen      = 4
	markerInterval = 512
)

// castagnoli is built once: CRC32c as used by MPA (and iSCSI, SCTP).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// padLen returns the pad after a ULPDU of length n so that length field,
// ULPDU and pad fill a multiple of 4 octets; markers do not count.
func padLen(n int) int { return (4 - (lengthLen+n)%4) % 4 }

// FPDULen returns the size of an FPDU carrying an n-byte ULPDU, without
// markers: length field, ULPDU, pad and CRC field.
func FPDULen(n int) int { return lengthLen + n + padLen(n) + crcLen }
