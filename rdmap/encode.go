package rdmap

import "github.com/iwarp-go/iwarp-go/ddp"

// AppendWrite appends the header of one RDMA Write segment (RFC 5040
// §4): a tagged DDP header with the RDMAP control field in RsvdULP. to is
// the tagged offset of this segment's first byte.
func AppendWrite(b []byte, last bool, stag uint32, to uint64) []byte {
	return ddp.AppendTagged(b, ddp.MakeControl(true, last), MakeControl(OpWrite), stag, to)
}

// AppendReadResponse appends the header of one RDMA Read Response segment
// (RFC 5040 §4). stag and to are the Read Request's sink STag and the
// sink TO of this segment's first byte.
func AppendReadResponse(b []byte, last bool, stag uint32, to uint64) []byte {
	return ddp.AppendTagged(b, ddp.MakeControl(true, last), MakeControl(OpReadResponse), stag, to)
}

// AppendSend appends the header of one segment of a Send variant (RFC 5040
// §4): an untagged DDP header on QN 0 with the message's MSN and this
// segment's MO. invSTag is written only for the Invalidate variants (RFC
// 5040 §4.1 puts the STag to invalidate there); the other two carry zero in
// that field, as siw sends them. It panics if op is not a Send variant.
func AppendSend(b []byte, op Opcode, last bool, invSTag, msn, mo uint32) []byte {
	if !op.IsSend() {
		panic("rdmap: AppendSend with " + op.String())
	}
	if !op.Invalidates() {
		invSTag = 0
	}
	return ddp.AppendUntagged(b, ddp.MakeControl(false, last), MakeControl(op), invSTag, QNSend, msn, mo)
}

// AppendReadRequest appends a whole RDMA Read Request (RFC 5040 §4): an
// untagged DDP header on QN 1 with L set and MO 0, and the 28-byte header.
func AppendReadRequest(b []byte, msn uint32, rr ReadRequestFields) []byte {
	b = ddp.AppendUntagged(b, ddp.MakeControl(false, true), MakeControl(OpReadRequest), 0, QNReadRequest, msn, 0)
	return AppendReadRequestBody(b, rr)
}

// StartWrite prepares s to segment an RDMA Write of pieces to (stag, to).
func StartWrite(s *ddp.Segmenter, pieces [][]byte, mulpdu int, stag uint32, to uint64) error {
	return s.StartTagged(pieces, mulpdu, MakeControl(OpWrite), stag, to)
}

// StartReadResponse prepares s to segment the RDMA Read Response to a Read
// Request with the given sink STag and TO.
func StartReadResponse(s *ddp.Segmenter, pieces [][]byte, mulpdu int, sinkSTag uint32, sinkTO uint64) error {
	return s.StartTagged(pieces, mulpdu, MakeControl(OpReadResponse), sinkSTag, sinkTO)
}

// StartSend prepares s to segment a Send variant with the given MSN;
// invSTag is used only by the Invalidate variants. It panics if op is not a
// Send variant.
func StartSend(s *ddp.Segmenter, op Opcode, pieces [][]byte, mulpdu int, invSTag, msn uint32) error {
	if !op.IsSend() {
		panic("rdmap: StartSend with " + op.String())
	}
	if !op.Invalidates() {
		invSTag = 0
	}
	return s.StartUntagged(pieces, mulpdu, MakeControl(op), invSTag, QNSend, msn)
}
