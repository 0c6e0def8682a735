package rpma

import "encoding/binary"

// Descriptor sizes of librpma 1.2.
const (
	// MRDescriptorLen is RPMA_MR_DESC_SIZE: 2*sizeof(uint64_t) +
	// sizeof(uint32_t) + sizeof(uint8_t).
	MRDescriptorLen = 21
	// PeerCfgDescriptorLen is the size rpma_peer_cfg_get_descriptor_size
	// reports: one byte.
	PeerCfgDescriptorLen = 1
)

// MRDescriptor is what rpma_mr_get_descriptor writes for a registered
// region and rpma_mr_remote_from_descriptor reads back:
//
//	addr u64 LE | length u64 LE | rkey u32 LE | usage u8
//
// Addr is the region's base as the peer addresses it: the initiator puts
// Addr + offset in the wire's Tagged Offset. RKey is the iWARP STag.
type MRDescriptor struct {
	Addr   uint64
	Length uint64
	RKey   uint32
	Usage  Usage
}

// Append appends the 21-byte descriptor to b.
func (d MRDescriptor) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, d.Addr)
	b = binary.LittleEndian.AppendUint64(b, d.Length)
	b = binary.LittleEndian.AppendUint32(b, d.RKey)
	return append(b, byte(d.Usage))
}

// ParseMRDescriptor decodes a descriptor as rpma_mr_remote_from_descriptor
// does: b must hold at least MRDescriptorLen bytes (more are ignored, as
// there) and the usage byte must not be zero ("usage type of memory is not
// set").
func ParseMRDescriptor(b []byte) (MRDescriptor, error) {
	if len(b) < MRDescriptorLen {
		return MRDescriptor{}, malformed("MR descriptor", len(b), "%d bytes, at least %d needed", len(b), MRDescriptorLen)
	}
	d := MRDescriptor{
		Addr:   binary.LittleEndian.Uint64(b[0:]),
		Length: binary.LittleEndian.Uint64(b[8:]),
		RKey:   binary.LittleEndian.Uint32(b[16:]),
		Usage:  Usage(b[20]),
	}
	if d.Usage == 0 {
		return MRDescriptor{}, malformed("MR descriptor", 20, "usage is zero")
	}
	return d, nil
}

// PeerCfg is the peer configuration librpma exchanges in a descriptor.
type PeerCfg struct {
	// DirectWriteToPmem declares that a completed RDMA Write followed by a
	// flush is durable on this peer. rpma_flush with
	// RPMA_FLUSH_TYPE_PERSISTENT fails unless the remote side set it.
	DirectWriteToPmem bool
}

// Append appends the 1-byte descriptor: (uint8_t)direct_write_to_pmem.
func (c PeerCfg) Append(b []byte) []byte {
	if c.DirectWriteToPmem {
		return append(b, 1)
	}
	return append(b, 0)
}

// ParsePeerCfg decodes the descriptor as rpma_peer_cfg_from_descriptor
// does: at least one byte, any non-zero value meaning true.
func ParsePeerCfg(b []byte) (PeerCfg, error) {
	if len(b) < PeerCfgDescriptorLen {
		return PeerCfg{}, malformed("peer-config descriptor", 0, "empty")
	}
	return PeerCfg{DirectWriteToPmem: b[0] != 0}, nil
}
