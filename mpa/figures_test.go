package mpa

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// The two annotated FPDUs of RFC 5044 §4.4, Figures 5 and 6, octet by
// octet as the figures give them.

// ddpSendHeader is the 18-octet untagged DDP header of both figures: Send
// with the Last flag (41 43), the reserved STag position, queue 0, the
// given MSN and MO 0.
func ddpSendHeader(msn uint32) []byte {
	h := []byte{0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0}
	h = binary.BigEndian.AppendUint32(h, msn)
	return binary.BigEndian.AppendUint32(h, 0)
}

// Figure 5: "an example FPDU sent as the first FPDU on the stream. As such,
// it starts with a Marker." A 42-octet ULPDU, 24 octets of zeros after the
// DDP header, and "The CRC32c has been correctly calculated and can be
// used as a reference."
const figure5 = "00 00 00 00" + // 0000 Marker: Reserved, FPDUPTR
	" 00 2a" + // 0004 ULPDU Length
	" 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00" + // 0006 DDP: Send, Last; queue 0; MSN 1; MO 0
	" 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00" + // 0018 Send data
	" 52 23 99 83" // 0030 CRC32c

// Figure 6: the second FPDU of a stream whose first FPDU (with its leading
// marker) takes octets 0 to 0x1eb; the marker at 0x200 falls inside it and
// points 0x14 octets back to its length field at 0x1ec.
const figure6 = "00 2a" + // 01ec Length
	" 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00" + // 01ee DDP: Send, Last; queue 0; MSN 2; MO 0
	" 00 00 00 14" + // 0200 Marker: Reserved, FPDUPTR 0x14
	" 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00" + // 0204 Send data
	" 84 92 58 98" // 021c CRC32c

func TestFPDU_RFC5044_4_4_Figure5(t *testing.T) {
	want := testutil.Unhex(t, figure5)
	require.Len(t, want, 0x34)
	// The figure's CRC is the CRC32c of every octet before it, the
	// leading marker included (§4.4 rule 2), little-endian on the wire.
	require.Equal(t, crc32.Checksum(want[:0x30], castagnoli), binary.LittleEndian.Uint32(want[0x30:]))

	spec := fpduSpec{hdr: ddpSendHeader(1), payload: make([]byte, 24)}
	got := encode(t, WriterConfig{CRC: true, Markers: true}, []fpduSpec{spec})
	require.Equal(t, want, got, "the Writer produces the figure")

	u := decodeAll(t, bytes.NewReader(want), ReaderConfig{CRC: true, Markers: true})
	require.Equal(t, [][]byte{spec.ulpdu()}, u, "the Reader takes it apart, markers removed")

	// The same octets with a flipped data bit fail the CRC.
	bad := bytes.Clone(want)
	bad[0x20] ^= 0x80
	_, err := NewReader(bytes.NewReader(bad), ReaderConfig{CRC: true, Markers: true}).ReadFPDU(make([]byte, 64))
	require.ErrorIs(t, err, ErrCRC)
}

func TestFPDU_RFC5044_4_4_Figure6(t *testing.T) {
	want := testutil.Unhex(t, figure6)
	require.Len(t, want, 0x220-0x1ec)
	// The CRC covers the marker inside the FPDU (§4.3: "All MPA Markers
	// are included in the containing FPDU CRC calculation").
	require.Equal(t, crc32.Checksum(want[:len(want)-4], castagnoli), binary.LittleEndian.Uint32(want[len(want)-4:]))

	// The first FPDU: a Send to queue 0 with Last set, MSN 1, ending at
	// 0x1ec: leading marker 4 + length 2 + ULPDU 482 + CRC 4.
	first := fpduSpec{hdr: ddpSendHeader(1), payload: make([]byte, 482-18)}
	second := fpduSpec{hdr: ddpSendHeader(2), payload: make([]byte, 24)}
	stream := encode(t, WriterConfig{CRC: true, Markers: true}, []fpduSpec{first, second})
	require.Len(t, stream, 0x220)
	require.Equal(t, want, stream[0x1ec:], "the Writer produces the figure at offset 0x1ec")

	u := decodeAll(t, bytes.NewReader(stream), ReaderConfig{CRC: true, Markers: true})
	require.Equal(t, [][]byte{first.ulpdu(), second.ulpdu()}, u)

	// A marker pointing anywhere else is error 3.
	bad := bytes.Clone(stream)
	bad[0x203] = 0x18
	r := NewReader(bytes.NewReader(bad), ReaderConfig{CRC: true, Markers: true})
	_, err := r.ReadFPDU(make([]byte, 512))
	require.NoError(t, err)
	_, err = r.ReadFPDU(make([]byte, 512))
	require.ErrorIs(t, err, ErrMarker)
}
