package rpma

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// The usage bits of src/include/librpma.h (RPMA_MR_USAGE_*), and the two
// values a sink advertises.
func TestUsage_LibrpmaH(t *testing.T) {
	require.Equal(t, Usage(0x01), UsageReadSrc)
	require.Equal(t, Usage(0x02), UsageReadDst)
	require.Equal(t, Usage(0x04), UsageWriteSrc)
	require.Equal(t, Usage(0x08), UsageWriteDst)
	require.Equal(t, Usage(0x10), UsageFlushTypeVisibility)
	require.Equal(t, Usage(0x20), UsageFlushTypePersistent)
	require.Equal(t, Usage(0x40), UsageSend)
	require.Equal(t, Usage(0x80), UsageRecv)
	require.Equal(t, Usage(0x19), UsageSink)
	require.Equal(t, Usage(0x39), UsageSinkPersistent)
	require.Equal(t, "READ_SRC|WRITE_DST|FLUSH_TYPE_VISIBILITY", UsageSink.String())
	require.Equal(t, "0", Usage(0).String())
}

// rpma_mr_get_descriptor (src/mr.c): htole64(addr), htole64(length),
// htole32(rkey), (uint8_t)usage; RPMA_MR_DESC_SIZE = 21.
func TestMRDescriptor_MrC_Bytes(t *testing.T) {
	d := MRDescriptor{Addr: 0x0102030405060708, Length: 0x1000, RKey: 0xAABBCCDD, Usage: UsageSinkPersistent}
	want := unhex(t, "0807060504030201 0010000000000000 ddccbbaa 39")
	got := d.Append(nil)
	require.Equal(t, want, got)
	require.Len(t, got, MRDescriptorLen)

	back, err := ParseMRDescriptor(got)
	require.NoError(t, err)
	require.Equal(t, d, back)

	// Longer input is accepted (desc_size is a minimum there).
	back, err = ParseMRDescriptor(append(got, 0xee, 0xff))
	require.NoError(t, err)
	require.Equal(t, d, back)
}

// rpma_mr_remote_from_descriptor rejects desc_size < 21 and usage == 0.
func TestMRDescriptor_MrC_Rejects(t *testing.T) {
	good := MRDescriptor{Addr: 1, Length: 2, RKey: 3, Usage: UsageSink}.Append(nil)
	for n := 0; n < MRDescriptorLen; n++ {
		_, err := ParseMRDescriptor(good[:n])
		require.ErrorIs(t, err, ErrMalformed, "length %d", n)
	}
	zero := append([]byte(nil), good...)
	zero[20] = 0
	_, err := ParseMRDescriptor(zero)
	require.ErrorIs(t, err, ErrMalformed)
	require.Contains(t, err.Error(), "usage is zero")
}

// src/peer_cfg.c: the descriptor is (uint8_t)direct_write_to_pmem; the
// reader takes any non-zero byte as true and needs at least one byte.
func TestPeerCfg_PeerCfgC(t *testing.T) {
	require.Equal(t, []byte{1}, PeerCfg{DirectWriteToPmem: true}.Append(nil))
	require.Equal(t, []byte{0}, PeerCfg{}.Append(nil))
	c, err := ParsePeerCfg([]byte{0x7f})
	require.NoError(t, err)
	require.True(t, c.DirectWriteToPmem)
	c, err = ParsePeerCfg([]byte{0})
	require.NoError(t, err)
	require.False(t, c.DirectWriteToPmem)
	_, err = ParsePeerCfg(nil)
	require.ErrorIs(t, err, ErrMalformed)
}

// struct common_data (examples/common/common-conn.h) as example 05's
// server fills it: data_offset, mr_desc_size = 21, pcfg_desc_size = 1, the
// MR descriptor at descriptors[0], the peer config at descriptors[21], two
// zero bytes left of the zero-initialised 24-byte array.
func TestCommonData_CommonConnH_Bytes(t *testing.T) {
	cases := []struct {
		name       string
		dataOffset uint16
		durable    bool
		want       string
	}{
		{"volatile", 0, false,
			"0000 15 01" + " 0000000000000000 0000100000000000 01230100 19" + " 00" + " 0000"},
		{"durable", 0, true,
			"0000 15 01" + " 0000000000000000 0000100000000000 01230100 39" + " 01" + " 0000"},
		// 07-atomic-write: data_offset = offsetof(struct log, used) = 8.
		{"atomic-write log", 8, true,
			"0800 15 01" + " 0000000000000000 0000100000000000 01230100 39" + " 01" + " 0000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := SinkCommonData(0, 1<<20, 0x00012301, tc.dataOffset, tc.durable)
			require.NoError(t, err)
			got := c.Append(nil)
			require.Equal(t, unhex(t, tc.want), got)
			require.Len(t, got, CommonDataLen)
			back, err := ParseCommonData(got)
			require.NoError(t, err)
			require.Equal(t, c, back)
		})
	}
}

// A VA-based base is what ibv_mr->addr gives a librpma server; the client
// adds its offset to it.
func TestCommonData_VABase(t *testing.T) {
	c, err := SinkCommonData(0x00007f12_34560000, 4096, 0xdeadbe01, 0, false)
	require.NoError(t, err)
	b := c.Append(nil)
	require.Equal(t, unhex(t, "0000 15 01 00005634127f0000 0010000000000000 01beadde 19 00 0000"), b)
}

// The example clients: "pdata.len < sizeof(struct common_data)" fails, and
// the descriptors must lie inside descriptors[].
func TestCommonData_Rejects(t *testing.T) {
	c, err := SinkCommonData(0, 1<<20, 7, 0, true)
	require.NoError(t, err)
	good := c.Append(nil)
	for n := 0; n < CommonDataLen; n++ {
		_, err := ParseCommonData(good[:n])
		require.ErrorIs(t, err, ErrMalformed, "length %d", n)
	}
	// Padding after the struct (rdma_cm may deliver more) is ignored.
	back, err := ParseCommonData(append(good, make([]byte, 28)...))
	require.NoError(t, err)
	require.Equal(t, c, back)

	mutate := func(i int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = v
		return b
	}
	for _, b := range [][]byte{
		mutate(2, 20), // mr_desc_size below 21
		mutate(2, 25), // beyond descriptors[]
		mutate(3, 4),  // 21 + 4 > 24
		mutate(24, 0), // usage byte zero
	} {
		_, err := ParseCommonData(b)
		require.ErrorIs(t, err, ErrMalformed, "% x", b)
	}
	// 04 and 07 send no peer config: pcfg_desc_size = 0.
	b := mutate(3, 0)
	back, err = ParseCommonData(b)
	require.NoError(t, err)
	require.False(t, back.HasPeerCfg)
}

func TestSinkCommonData_Checks(t *testing.T) {
	_, err := SinkCommonData(0, 1<<20, 1, 4, false)
	require.ErrorContains(t, err, "8-aligned")
	_, err = SinkCommonData(0, 2047, 1, 1024, false)
	require.ErrorContains(t, err, "exceed")
	_, err = SinkCommonData(0, 2048, 1, 1024, false)
	require.NoError(t, err)
	_, err = SinkCommonData(0, 100, 1, 0, false)
	require.Error(t, err)
}

// Example 09: the client sends {offset: dst_offset, length: HELLO_STR_SIZE
// (1024), op_context: FLUSH_ID (0xF01D)} and expects op_context back.
// protobuf-c packs the fields in number order, fixed64 = wire type 1.
func TestGPSPM_Example09_Bytes(t *testing.T) {
	req := FlushRequest{Offset: 0, Length: 1024, OpContext: 0xF01D}
	want := unhex(t, "09 0000000000000000 11 0004000000000000 19 1df0000000000000")
	got := req.Append(nil)
	require.Equal(t, want, got)
	require.Len(t, got, FlushRequestLen)
	back, err := ParseFlushRequest(got)
	require.NoError(t, err)
	require.Equal(t, req, back)

	resp := FlushResponse{OpContext: 0xF01D}
	gotResp := resp.Append(nil)
	require.Equal(t, unhex(t, "09 1df0000000000000"), gotResp)
	require.Len(t, gotResp, FlushResponseLen)
	backResp, err := ParseFlushResponse(gotResp)
	require.NoError(t, err)
	require.Equal(t, resp, backResp)

	got = FlushRequest{Offset: 1, Length: 2, OpContext: 3}.Append(nil)
	require.Equal(t, unhex(t, "09 0100000000000000 11 0200000000000000 19 0300000000000000"), got)
}

// What protobuf-c's unpack accepts besides the canonical form: fields in
// any order, repeated fields (last wins), unknown fields of every
// supported wire type.
func TestGPSPM_AcceptsValidProtobuf(t *testing.T) {
	cases := map[string]struct {
		in   string
		want FlushRequest
	}{
		"reordered":                        {"19 0300000000000000 09 0100000000000000 11 0200000000000000", FlushRequest{1, 2, 3}},
		"last wins":                        {"09 0100000000000000 11 0200000000000000 19 0300000000000000 09 0900000000000000", FlushRequest{9, 2, 3}},
		"unknown varint 4 and fixed32 5":   {"09 0100000000000000 11 0200000000000000 19 0300000000000000 20 ac02 2d 01020304", FlushRequest{1, 2, 3}},
		"unknown bytes 6":                  {"32 03 616263 09 0100000000000000 11 0200000000000000 19 0300000000000000", FlushRequest{1, 2, 3}},
		"unknown fixed64 100 (2-byte tag)": {"a106 0000000000000000 09 0100000000000000 11 0200000000000000 19 0300000000000000", FlushRequest{1, 2, 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFlushRequest(unhex(t, tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// Input that is not a valid GPSPM_flush_request gets a clear error.
func TestGPSPM_RejectsMalformed(t *testing.T) {
	cases := map[string]struct{ in, reason string }{
		"empty":              {"", "required field offset (1) missing"},
		"missing op_context": {"09 0100000000000000 11 0200000000000000", "required field op_context (3) missing"},
		"truncated value":    {"09 0100000000000000 11 0200000000000000 19 03000000000000", "ends inside 64-bit field 3"},
		"truncated tag":      {"09 0100000000000000 11 0200000000000000 19 0300000000000000 80", "ends inside a field tag"},
		"wrong wire type":    {"08 01 11 0200000000000000 19 0300000000000000", "field 1 has wire type 0, want fixed64"},
		"field number zero":  {"01 0000000000000000", "field number 0"},
		"group":              {"0b 0c 09 0100000000000000 11 0200000000000000 19 0300000000000000", "wire type 3"},
		"wire type 7":        {"0f", "wire type 7"},
		"bytes past the end": {"32 7f 61 09 0100000000000000 11 0200000000000000 19 0300000000000000", "claims 127 bytes"},
		"overlong varint":    {"20 ffffffffffffffffffff01", "bad varint"},
		"varint overflow":    {"20 ffffffffffffffffff02", "bad varint"},
		"six-byte tag":       {"8980808080 00", "tag longer than 5"},
		"text, not protobuf": {"68656c6c6f20776f726c64", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFlushRequest(unhex(t, tc.in))
			require.ErrorIs(t, err, ErrMalformed)
			var de *DecodeError
			require.True(t, errors.As(err, &de))
			require.Equal(t, "GPSPM_flush_request", de.What)
			require.Contains(t, err.Error(), tc.reason)
		})
	}
	_, err := ParseFlushResponse(nil)
	require.ErrorContains(t, err, "op_context (1) missing")
	_, err = ParseFlushResponse(unhex(t, "08 01"))
	require.ErrorContains(t, err, "want fixed64")
	r, err := ParseFlushResponse(unhex(t, "09 0100000000000000 10 05 09 0200000000000000"))
	require.NoError(t, err)
	require.Equal(t, uint64(2), r.OpContext)
}
