package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// A header claiming a 4 GiB snapshot length must not make the reader
// allocate by it.
func TestRead_HugeSnaplenIsBounded(t *testing.T) {
	file := writeRaw(t, linkEthernet, handshake(cli4, srv4, 1, 2))
	binary.LittleEndian.PutUint32(file[16:], 0xffffffff)
	var conns []*Conn
	var err error
	n := testutil.Allocated(func() { conns, err = Read(bytes.NewReader(file)) })
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.Less(t, n, uint64(1<<20), "allocation bounded by the input, not the header")
}

func TestRead_PcapngLengthsChecked(t *testing.T) {
	segs := handshake(cli4, srv4, 1, 2)
	segs = append(segs, rawSeg{src: cli4, dst: srv4, seq: 2, ack: 3, payload: []byte("data")})
	good := writeRawNg(t, linkEthernet, segs)
	conns, err := Read(bytes.NewReader(good))
	require.NoError(t, err)
	require.Equal(t, "data", string(conns[0].Up.Data))

	// Find the enhanced packet blocks and corrupt their captured length.
	var epbs []int
	for off := 0; off < len(good); {
		typ, n := binary.LittleEndian.Uint32(good[off:]), int(binary.LittleEndian.Uint32(good[off+4:]))
		if typ == ngEnhancedPacket {
			epbs = append(epbs, off)
		}
		off += n
	}
	require.Len(t, epbs, 4)
	bad := bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[epbs[3]+20:], 0x7fffffff)
	n := testutil.Allocated(func() { _, err = Read(bytes.NewReader(bad)) })
	require.ErrorIs(t, err, ErrMalformed)
	require.Less(t, n, uint64(1<<20))

	// A block length running past the end of the file.
	bad = bytes.Clone(good)
	binary.LittleEndian.PutUint32(bad[epbs[0]+4:], 1<<30)
	_, err = Read(bytes.NewReader(bad))
	require.ErrorIs(t, err, ErrMalformed)

	// An interface snapshot length of 4 GiB is neutralised, not honoured.
	bad = bytes.Clone(good)
	for off := 0; off < len(bad); {
		typ, n := binary.LittleEndian.Uint32(bad[off:]), int(binary.LittleEndian.Uint32(bad[off+4:]))
		if typ == ngInterface {
			binary.LittleEndian.PutUint32(bad[off+12:], 0xffffffff)
		}
		off += n
	}
	n = testutil.Allocated(func() { conns, err = Read(bytes.NewReader(bad)) })
	require.NoError(t, err)
	require.Equal(t, "data", string(conns[0].Up.Data))
	require.Less(t, n, uint64(1<<20))
}

func TestRead_Gzip(t *testing.T) {
	file := writeRaw(t, linkEthernet, append(handshake(cli4, srv4, 1, 2),
		rawSeg{src: cli4, dst: srv4, seq: 2, ack: 3, payload: []byte("zipped")}))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, err := zw.Write(file)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	conns, err := Read(&z)
	require.NoError(t, err)
	require.Equal(t, "zipped", string(conns[0].Up.Data))
}

// Input that is neither pcap nor pcapng, plain or compressed, is refused
// with a message that says so, before any reader is set up.
func TestRead_NotACapture(t *testing.T) {
	for _, junk := range [][]byte{nil, []byte("hi"), []byte("this is not a capture")} {
		_, err := Read(bytes.NewReader(junk))
		require.ErrorIs(t, err, ErrMalformed, "%q", junk)
	}
	_, err := Read(bytes.NewReader([]byte("this is not a capture")))
	require.ErrorContains(t, err, "not a pcap or pcapng file")
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte("compressed, but still not a capture"))
	require.NoError(t, zw.Close())
	_, err = Read(&z)
	require.ErrorContains(t, err, "not a pcap or pcapng file")
}
