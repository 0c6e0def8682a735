package dissect_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// Length fields in a capture's headers never size an allocation: a pcap
// header announcing a 4 GiB snapshot length and a pcapng packet block
// claiming 4 GiB of data cost no more than the file itself and the bounded
// packet buffer.
func TestDecode_LengthFieldsDoNotSizeAllocations(t *testing.T) {
	pcap, err := os.ReadFile(testutil.CapturePath(t, "rping-lo.pcap"))
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(pcap[16:], 0xffffffff)
	var d *dissect.Dissection
	n := testutil.Allocated(func() { d, err = dissect.Decode(bytes.NewReader(pcap)) })
	require.NoError(t, err)
	require.Len(t, d.Streams, 1)
	require.Less(t, n, uint64(16<<20), "allocated %d octets", n)

	// A pcapng section, an interface without a snapshot limit, and an
	// enhanced packet block that claims 4 GiB of captured data.
	var ng bytes.Buffer
	le := binary.LittleEndian
	ng.Write(le.AppendUint32(nil, 0x0a0d0d0a))
	ng.Write(le.AppendUint32(nil, 28))
	ng.Write(le.AppendUint32(nil, 0x1a2b3c4d))
	ng.Write([]byte{1, 0, 0, 0})
	ng.Write(le.AppendUint64(nil, ^uint64(0)))
	ng.Write(le.AppendUint32(nil, 28))
	ng.Write(le.AppendUint32(nil, 1)) // interface
	ng.Write(le.AppendUint32(nil, 20))
	ng.Write([]byte{1, 0, 0, 0})
	ng.Write(le.AppendUint32(nil, 0)) // snaplen 0: unlimited
	ng.Write(le.AppendUint32(nil, 20))
	ng.Write(le.AppendUint32(nil, 6)) // enhanced packet
	ng.Write(le.AppendUint32(nil, 36))
	ng.Write(make([]byte, 12))
	ng.Write(le.AppendUint32(nil, 0xffffffff)) // captured length
	ng.Write(le.AppendUint32(nil, 0xffffffff))
	ng.Write(le.AppendUint32(nil, 36))
	n = testutil.Allocated(func() { _, err = dissect.Decode(bytes.NewReader(ng.Bytes())) })
	require.ErrorIs(t, err, dissect.ErrCapture)
	require.Less(t, n, uint64(1<<20), "allocated %d octets", n)
}

// Compressed captures are read; junk is an ErrCapture.
func TestDecode_GzipAndJunk(t *testing.T) {
	pcap, err := os.ReadFile(testutil.CapturePath(t, "rping-lo.pcap"))
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pcap)
	require.NoError(t, zw.Close())
	d, err := dissect.Decode(&gz)
	require.NoError(t, err)
	require.Len(t, d.Streams, 1)
	require.Len(t, d.Streams[0].PDUs, 70)

	for _, junk := range [][]byte{nil, []byte("hello"), []byte("not a capture file at all, really"), {0x1f, 0x8b, 0}} {
		_, err := dissect.Decode(bytes.NewReader(junk))
		require.ErrorIs(t, err, dissect.ErrCapture, "%q", junk)
	}
	_, err = dissect.DecodeFile("no/such/file.pcap")
	require.ErrorIs(t, err, dissect.ErrCapture)
}
