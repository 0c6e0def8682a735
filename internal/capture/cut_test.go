package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// segments is a short conversation: the handshake and three data segments.
func segments() []rawSeg {
	segs := handshake(cli4, srv4, 100, 900)
	return append(segs,
		rawSeg{src: cli4, dst: srv4, seq: 101, ack: 901, payload: fill(40, 'a')},
		rawSeg{src: srv4, dst: cli4, seq: 901, ack: 141, payload: fill(30, 'b')},
		rawSeg{src: cli4, dst: srv4, seq: 141, ack: 931, payload: fill(50, 'c')})
}

// records returns where each record of a capture file starts, and the
// file's end: pcap records after the 24-octet header, pcapng blocks.
func records(t *testing.T, file []byte, ng bool) []int {
	t.Helper()
	var offs []int
	off := 24
	if ng {
		off = 0
	}
	for off < len(file) {
		offs = append(offs, off)
		if ng {
			off += int(binary.LittleEndian.Uint32(file[off+4:]))
		} else {
			off += 16 + int(binary.LittleEndian.Uint32(file[off+8:]))
		}
	}
	require.Equal(t, len(file), off)
	return append(offs, off)
}

// A file that ends inside a record, in its header or its data, reads as
// the records before it, with a CutError that says which frame is cut and
// where.
func TestRead_CutMidRecord(t *testing.T) {
	for _, ng := range []bool{false, true} {
		file := writeRaw(t, linkEthernet, segments())
		firstPacket := 0 // the index in records of frame 1
		if ng {
			file = writeRawNg(t, linkEthernet, segments())
			firstPacket = 2 // the section header and the interface block come first
		}
		offs := records(t, file, ng)
		whole, err := Read(bytes.NewReader(file))
		require.NoError(t, err)
		require.Len(t, whole, 1)
		for _, frame := range []int{4, 6} { // the first and the last data segment
			start, next := offs[firstPacket+frame-1], offs[firstPacket+frame]
			before, err := Read(bytes.NewReader(file[:start]))
			require.NoError(t, err)
			for _, cut := range []int{start + 3, start + 20, next - 1} {
				conns, err := Read(bytes.NewReader(file[:cut]))
				require.ErrorIs(t, err, ErrCut, "ng %v, frame %d cut at %d", ng, frame, cut)
				var ce *CutError
				require.True(t, errors.As(err, &ce))
				require.Equal(t, frame, ce.Frame)
				require.Equal(t, start, ce.Offset)
				require.Equal(t, cut-start, ce.Have)
				if cut-start >= 16 {
					require.Equal(t, next-start, ce.Want)
				}
				require.Contains(t, ce.Error(), "frame")
				require.Equal(t, before, conns, "the records before the cut, decoded as without it")
			}
		}
	}
}

// A length that no cut can leave is damage, not a cut: the file is
// refused.
func TestRead_ImplausibleLastRecordIsMalformed(t *testing.T) {
	file := writeRaw(t, linkEthernet, segments())
	offs := records(t, file, false)
	last := offs[len(offs)-2]
	binary.LittleEndian.PutUint32(file[last+8:], 1<<30)
	_, err := Read(bytes.NewReader(file))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrCut)
}
