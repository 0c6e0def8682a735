package lab

import (
	"encoding/binary"
	"regexp"
	"strconv"

	"github.com/iwarp-go/iwarp-go/dissect"
)

// SiwCRCError is siw's kernel log line for an FPDU whose CRC field does
// not match the CRC siw computed (siw_get_trailer):
// "siw: crc error. in: %08x, own %08x, op %u".
type SiwCRCError struct {
	// In is the CRC field siw read and Own the CRC it computed, in wire
	// order (the guest is little-endian and prints each as a number).
	In, Own [4]byte
	Op      uint8 // RDMAP opcode
}

var siwCRCLine = regexp.MustCompile(`siw: crc error\. in: ([0-9a-f]{8}), own ([0-9a-f]{8}), op (\d+)`)

// ParseSiwCRCErrors finds siw's CRC error lines in a kernel log.
func ParseSiwCRCErrors(log string) []SiwCRCError {
	var out []SiwCRCError
	for _, m := range siwCRCLine.FindAllStringSubmatch(log, -1) {
		in, _ := strconv.ParseUint(m[1], 16, 32)
		own, _ := strconv.ParseUint(m[2], 16, 32)
		op, err := strconv.ParseUint(m[3], 10, 8)
		if err != nil {
			continue
		}
		var e SiwCRCError
		binary.LittleEndian.PutUint32(e.In[:], uint32(in))
		binary.LittleEndian.PutUint32(e.Own[:], uint32(own))
		e.Op = uint8(op)
		out = append(out, e)
	}
	return out
}

// SplitField reports whether e is siw misreading a right CRC field that
// arrived in two socket buffers (dissect.SiwTrailer), and how many of its
// octets the first held. It can tell only for an FPDU without pad octets:
// then siw's own CRC is the right one, and what it read is that CRC's
// octets moved as the model moves them, with the previous FPDU's in the
// rest. With pad octets siw's own CRC is wrong too, and the log alone does
// not show the field on the wire: a capture does (dissect notes it).
func (e SiwCRCError) SplitField() (first int, ok bool) {
	if e.In == e.Own {
		return 0, false
	}
	for first = 1; first < 4; first++ {
		var t dissect.SiwTrailer
		copy(t[4:], e.In[:]) // whatever siw read last stays where the copies do not reach
		t.Read(e.Own[:], first)
		if t.CRC() == e.In {
			return first, true
		}
	}
	return 0, false
}
