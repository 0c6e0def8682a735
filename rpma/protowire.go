package rpma

import "encoding/binary"

// The few pieces of the protobuf binary format the GPSPM messages need.
// Wire types (protobuf encoding spec): 0 varint, 1 64-bit, 2
// length-delimited, 3/4 group start/end (deprecated), 5 32-bit.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// maxVarintLen is the longest varint of a 64-bit value; maxTagLen that of
// a field tag (a 32-bit value).
const (
	maxVarintLen = 10
	maxTagLen    = 5
)

// readVarint decodes a varint at b[0:], returning the value and its length,
// or n = 0 if b ends inside it, or n < 0 if it is longer than ten bytes or
// overflows 64 bits.
func readVarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b); i++ {
		if i == maxVarintLen {
			return 0, -1
		}
		c := b[i]
		if i == maxVarintLen-1 && c > 1 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// field is one decoded field: its number, wire type, and for 64-bit fields
// the value.
type field struct {
	num  uint64
	typ  uint8
	fix  uint64
	next int // offset of the following field
}

// nextField decodes the field starting at b[off:]. Unknown fields are
// skipped whole (a proto2 parser keeps them; these messages have no use
// for them); groups and wire types 6 and 7 are rejected.
func nextField(what string, b []byte, off int) (field, error) {
	// protobuf-c reads a tag of at most five bytes (a 32-bit value).
	tag, n := readVarint(b[off:min(len(b), off+maxTagLen)])
	switch {
	case n == 0 && len(b)-off >= maxTagLen:
		return field{}, malformed(what, off, "field tag longer than %d bytes", maxTagLen)
	case n == 0:
		return field{}, malformed(what, off, "message ends inside a field tag")
	}
	f := field{num: tag >> 3, typ: uint8(tag & 7)}
	if f.num == 0 || f.num > 1<<29-1 {
		return field{}, malformed(what, off, "field number %d outside 1..2^29-1", f.num)
	}
	p := off + n
	rest := b[p:]
	switch f.typ {
	case wireVarint:
		_, m := readVarint(rest)
		if m <= 0 {
			return field{}, malformed(what, p, "bad varint in field %d", f.num)
		}
		p += m
	case wireFixed64:
		if len(rest) < 8 {
			return field{}, malformed(what, p, "message ends inside 64-bit field %d", f.num)
		}
		f.fix = binary.LittleEndian.Uint64(rest)
		p += 8
	case wireFixed32:
		if len(rest) < 4 {
			return field{}, malformed(what, p, "message ends inside 32-bit field %d", f.num)
		}
		p += 4
	case wireBytes:
		l, m := readVarint(rest)
		if m <= 0 {
			return field{}, malformed(what, p, "bad length varint in field %d", f.num)
		}
		if l > uint64(len(rest)-m) {
			return field{}, malformed(what, p, "field %d claims %d bytes, %d remain", f.num, l, len(rest)-m)
		}
		p += m + int(l)
	default:
		return field{}, malformed(what, off, "field %d has wire type %d (groups and types 6, 7 are not accepted)", f.num, f.typ)
	}
	f.next = p
	return f, nil
}

// appendFixed64 appends field num as wire type 1.
func appendFixed64(b []byte, num uint8, v uint64) []byte {
	b = append(b, num<<3|wireFixed64)
	return binary.LittleEndian.AppendUint64(b, v)
}
