package rpma

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the examples' private-data container (examples/common/common-conn.h).
const (
	// DescriptorsMax is DESCRIPTORS_MAX_SIZE, the descriptors[] array:
	// "Limited by the maximum length of the private data for rdma_connect()
	// in case of RDMA_PS_TCP (56 bytes)".
	DescriptorsMax = 24
	// CommonDataLen is sizeof(struct common_data): u16 + u8 + u8 + 24, no
	// padding.
	CommonDataLen = 4 + DescriptorsMax
	// ExampleDataLen is the room the example clients need at data_offset:
	// HELLO_STR_SIZE (examples/common/common-hello.h) and LOG_DATA_SIZE
	// (07-atomic-write) are both 1024.
	ExampleDataLen = 1024
)

// CommonData is struct common_data, the 28 bytes librpma 1.2's example
// servers send as their connection private data:
//
//	data_offset u16 | mr_desc_size u8 | pcfg_desc_size u8 | descriptors[24]
//
// with the MR descriptor at descriptors[0] and the peer-config descriptor at
// descriptors[mr_desc_size]. The struct is copied in host byte order; every
// librpma platform (x86-64, aarch64) is little-endian, so data_offset is
// encoded little-endian.
type CommonData struct {
	// DataOffset is where the example clients put their data, as a region
	// offset (07-atomic-write: the offset of its u64 "used" counter).
	DataOffset uint16
	MR         MRDescriptor
	// HasPeerCfg says whether a peer-config descriptor follows the MR
	// descriptor (pcfg_desc_size != 0). Example 05's client fails without
	// one; 04 and 07 ignore it.
	HasPeerCfg bool
	PeerCfg    PeerCfg
}

// Append appends the 28-byte struct: mr_desc_size = 21, pcfg_desc_size = 1
// or 0, unused descriptor bytes zero (the servers zero-initialise it).
func (c CommonData) Append(b []byte) []byte {
	var s [CommonDataLen]byte
	binary.LittleEndian.PutUint16(s[0:], c.DataOffset)
	s[2] = MRDescriptorLen
	// The appends write in place: each slice has room up to the array's end.
	c.MR.Append(s[4:4:CommonDataLen])
	if c.HasPeerCfg {
		s[3] = PeerCfgDescriptorLen
		c.PeerCfg.Append(s[4+MRDescriptorLen : 4+MRDescriptorLen : CommonDataLen])
	}
	return append(b, s[:]...)
}

// ParseCommonData decodes the private data as the example clients do. They
// give up on anything shorter than 28 bytes (bytes past 28 are ignored:
// rdma_cm may pad private data). The descriptor sizes must lie inside
// descriptors[]: mr_desc_size at least 21, and with pcfg_desc_size the
// whole must fit the 24 bytes.
func ParseCommonData(b []byte) (CommonData, error) {
	const what = "common_data"
	if len(b) < CommonDataLen {
		return CommonData{}, malformed(what, len(b), "%d bytes, %d needed", len(b), CommonDataLen)
	}
	mrSize, pcfgSize := int(b[2]), int(b[3])
	if mrSize < MRDescriptorLen || mrSize > DescriptorsMax {
		return CommonData{}, malformed(what, 2, "mr_desc_size %d outside %d..%d", mrSize, MRDescriptorLen, DescriptorsMax)
	}
	if mrSize+pcfgSize > DescriptorsMax {
		return CommonData{}, malformed(what, 3, "mr_desc_size %d + pcfg_desc_size %d exceed the %d-byte descriptors[]", mrSize, pcfgSize, DescriptorsMax)
	}
	desc := b[4:CommonDataLen]
	mr, err := ParseMRDescriptor(desc[:mrSize])
	if err != nil {
		return CommonData{}, err
	}
	c := CommonData{DataOffset: binary.LittleEndian.Uint16(b[0:]), MR: mr}
	if pcfgSize > 0 {
		c.HasPeerCfg = true
		c.PeerCfg, _ = ParsePeerCfg(desc[mrSize : mrSize+pcfgSize])
	}
	return c, nil
}

// SinkCommonData returns the blob a sink sends to librpma clients for a
// region of length bytes at base (the Tagged Offset of region byte 0) with
// the given STag. durable selects usage 0x39 with direct_write_to_pmem = 1;
// otherwise 0x19 and 0. Only a mode in which a completed flush really is
// durable may pass durable = true.
//
// dataOffset must be 8-aligned (07-atomic-write reads and atomically writes
// a u64 there) and leave ExampleDataLen bytes inside the region.
func SinkCommonData(base, length uint64, stag uint32, dataOffset uint16, durable bool) (CommonData, error) {
	if dataOffset%8 != 0 {
		return CommonData{}, fmt.Errorf("rpma: data_offset %d is not 8-aligned", dataOffset)
	}
	if length < uint64(dataOffset)+ExampleDataLen {
		return CommonData{}, fmt.Errorf("rpma: data_offset %d + %d bytes exceed the %d-byte region", dataOffset, ExampleDataLen, length)
	}
	usage := UsageSink
	if durable {
		usage = UsageSinkPersistent
	}
	return CommonData{
		DataOffset: dataOffset,
		MR:         MRDescriptor{Addr: base, Length: length, RKey: stag, Usage: usage},
		HasPeerCfg: true,
		PeerCfg:    PeerCfg{DirectWriteToPmem: durable},
	}, nil
}
