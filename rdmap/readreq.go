package rdmap

import "encoding/binary"

// ReadRequest is a view of the 28-byte RDMA Read Request header that
// follows the untagged DDP header (RFC 5040 §4): Data Sink STag and
// Tagged Offset, RDMA Read Message Size, Data Source STag and Tagged
// Offset. It is also the "Terminated RDMA Header" a Terminate may carry.
type ReadRequest []byte

// ParseReadRequest returns the view at the start of b, or false if b is
// shorter than ReadRequestBodyLen.
func ParseReadRequest(b []byte) (ReadRequest, bool) {
	if len(b) < ReadRequestBodyLen {
		return nil, false
	}
	return ReadRequest(b[:ReadRequestBodyLen]), true
}

// SinkSTag returns the Data Sink STag: where the requester wants the data.
func (r ReadRequest) SinkSTag() uint32 { return binary.BigEndian.Uint32(r[0:]) }

// SinkTO returns the Data Sink Tagged Offset.
func (r ReadRequest) SinkTO() uint64 { return binary.BigEndian.Uint64(r[4:]) }

// Size returns the RDMA Read Message Size in bytes.
func (r ReadRequest) Size() uint32 { return binary.BigEndian.Uint32(r[12:]) }

// SrcSTag returns the Data Source STag: the responder's region.
func (r ReadRequest) SrcSTag() uint32 { return binary.BigEndian.Uint32(r[16:]) }

// SrcTO returns the Data Source Tagged Offset.
func (r ReadRequest) SrcTO() uint64 { return binary.BigEndian.Uint64(r[20:]) }

// Fields returns the header's values.
func (r ReadRequest) Fields() ReadRequestFields {
	return ReadRequestFields{
		SinkSTag: r.SinkSTag(), SinkTO: r.SinkTO(), Size: r.Size(),
		SrcSTag: r.SrcSTag(), SrcTO: r.SrcTO(),
	}
}

// ReadRequestFields are the values of a Read Request header.
type ReadRequestFields struct {
	SinkSTag uint32
	SinkTO   uint64
	Size     uint32
	SrcSTag  uint32
	SrcTO    uint64
}

// AppendReadRequestBody appends the 28-byte Read Request header.
func AppendReadRequestBody(b []byte, f ReadRequestFields) []byte {
	b = binary.BigEndian.AppendUint32(b, f.SinkSTag)
	b = binary.BigEndian.AppendUint64(b, f.SinkTO)
	b = binary.BigEndian.AppendUint32(b, f.Size)
	b = binary.BigEndian.AppendUint32(b, f.SrcSTag)
	return binary.BigEndian.AppendUint64(b, f.SrcTO)
}
