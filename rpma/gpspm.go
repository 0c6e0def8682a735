package rpma

// GPSPM message sizes. Both messages hold only required fixed64 fields
// (examples/common/gpspm/GPSPM_flush.proto, proto2), so their encodings have
// a fixed length: one tag byte and eight value bytes per field.
const (
	FlushRequestLen  = 27
	FlushResponseLen = 9
	// MessageSizeMax is MSG_SIZE_MAX of the example (flush-to-persistent-
	// GPSPM.h): the size of its send and receive buffers. A target posts
	// receives of at least FlushRequestLen bytes; the example posts 512.
	MessageSizeMax = 512
)

// FlushRequest is GPSPM_flush_request:
//
//	required fixed64 offset = 1;      // within the memory registration
//	required fixed64 length = 2;
//	required fixed64 op_context = 3;  // echoed in the response
//
// The example server persists [offset, offset+length) of its registered
// region, then answers.
type FlushRequest struct {
	Offset, Length, OpContext uint64
}

// FlushResponse is GPSPM_flush_response: required fixed64 op_context = 1.
type FlushResponse struct {
	OpContext uint64
}

// Append appends the 27-byte encoding, fields in number order as protobuf-c
// packs them: 09 <offset> 11 <length> 19 <op_context>.
func (r FlushRequest) Append(b []byte) []byte {
	b = appendFixed64(b, 1, r.Offset)
	b = appendFixed64(b, 2, r.Length)
	return appendFixed64(b, 3, r.OpContext)
}

// Append appends the 9-byte encoding: 09 <op_context>.
func (r FlushResponse) Append(b []byte) []byte {
	return appendFixed64(b, 1, r.OpContext)
}

// ParseFlushRequest decodes a GPSPM_flush_request with the rules of
// protobuf-c's unpack, which the example server uses: every required field
// present, each with wire type 1 (a known field with another wire type is
// an error), unknown fields skipped, a repeated field's last value kept,
// and the whole input consumed by well-formed fields. b is the received
// message exactly (the receive completion's byte count), not the buffer.
func ParseFlushRequest(b []byte) (FlushRequest, error) {
	const what = "GPSPM_flush_request"
	var r FlushRequest
	var seen uint8
	for off := 0; off < len(b); {
		f, err := nextField(what, b, off)
		if err != nil {
			return FlushRequest{}, err
		}
		if f.num >= 1 && f.num <= 3 {
			if f.typ != wireFixed64 {
				return FlushRequest{}, malformed(what, off, "field %d has wire type %d, want fixed64", f.num, f.typ)
			}
			seen |= 1 << (f.num - 1)
			switch f.num {
			case 1:
				r.Offset = f.fix
			case 2:
				r.Length = f.fix
			case 3:
				r.OpContext = f.fix
			}
		}
		off = f.next
	}
	for i, name := range [3]string{"offset", "length", "op_context"} {
		if seen&(1<<i) == 0 {
			return FlushRequest{}, malformed(what, len(b), "required field %s (%d) missing", name, i+1)
		}
	}
	return r, nil
}

// ParseFlushResponse decodes a GPSPM_flush_response with the same rules.
func ParseFlushResponse(b []byte) (FlushResponse, error) {
	const what = "GPSPM_flush_response"
	var r FlushResponse
	seen := false
	for off := 0; off < len(b); {
		f, err := nextField(what, b, off)
		if err != nil {
			return FlushResponse{}, err
		}
		if f.num == 1 {
			if f.typ != wireFixed64 {
				return FlushResponse{}, malformed(what, off, "field 1 has wire type %d, want fixed64", f.typ)
			}
			r.OpContext, seen = f.fix, true
		}
		off = f.next
	}
	if !seen {
		return FlushResponse{}, malformed(what, len(b), "required field op_context (1) missing")
	}
	return r, nil
}
