package dissect_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
)

// A capture that tcpdump left cut short, inside the record of a frame, is
// decoded up to that frame: the report says where it stops, and what
// comes before is what the whole capture shows there.
func TestDecode_CutMidRecord(t *testing.T) {
	file, err := os.ReadFile(testutil.CapturePath(t, "rping-lo.pcap"))
	require.NoError(t, err)
	whole, err := dissect.Decode(bytes.NewReader(file))
	require.NoError(t, err)
	require.Nil(t, whole.Cut)
	var starts []int // where each frame's record starts
	for off := 24; off < len(file); off += 16 + int(binary.LittleEndian.Uint32(file[off+8:])) {
		starts = append(starts, off)
	}
	for _, frame := range []int{20, 50} {
		start := starts[frame-1]
		for _, cut := range []int{start + 7, start + 60} {
			d, err := dissect.Decode(bytes.NewReader(file[:cut]))
			require.NoError(t, err, "cut at %d", cut)
			require.NotNil(t, d.Cut)
			require.Equal(t, frame, d.Cut.Frame)
			require.Equal(t, start, d.Cut.Offset)
			require.Equal(t, cut-start, d.Cut.Have)
			var got []*dissect.FPDU
			for _, p := range whole.Streams[0].PDUs {
				if p.LastFrame() < frame {
					got = append(got, p)
				}
			}
			require.Equal(t, got, d.Streams[0].PDUs, "the FPDUs before frame %d", frame)
			var text strings.Builder
			require.NoError(t, d.WriteText(&text))
			require.Contains(t, text.String(), "the capture file is cut short: it ends inside the record of frame")
			require.Contains(t, text.String(), "frames 1 to ")
		}
	}
}

// "header not captured" is said only of an FPDU whose header, as long as
// its opcode makes it, the capture lacks: a Write cut after its 14-octet
// tagged header has its header decoded; a Read Request cut at the same
// point has not.
func TestStream_HeaderCapturedOfATruncatedFPDU(t *testing.T) {
	up, ends := fpdus(t, mpa.WriterConfig{}, send(1, "first"), write(true, 9, 0x1000, pattern(2000)))
	rr, rrEnds := fpdus(t, mpa.WriterConfig{}, send(1, "first"), readReq(1))
	for _, c := range []struct {
		stream []byte
		at     int // captured octets of the FPDU
		err    string
		op     string
	}{
		{up[:ends[0]+30], 30, "", "RDMA Write"},
		{up[:ends[0]+16], 16, "", "RDMA Write"},
		{up[:ends[0]+10], 10, "header not captured", "RDMA Write"},
		{rr[:rrEnds[0]+30], 30, "header not captured", "RDMA Read Request"},
	} {
		s := dissect.DecodeStreams(append(frame(t, mpa.KindRequest, 0, irdord, ""), c.stream...), frame(t, mpa.KindReply, 0, irdord, ""))
		require.Len(t, s.PDUs, 2)
		p := s.PDUs[1]
		require.True(t, p.Truncated)
		require.Equal(t, c.at, p.Len)
		require.Equal(t, c.op, p.Op)
		require.Equal(t, c.err, p.Error, "%s cut after %d octets", c.op, c.at)
		if c.err == "" {
			require.NotNil(t, p.STag)
			require.Equal(t, dissect.Hex32(9), *p.STag)
			require.Equal(t, dissect.Hex64(0x1000), *p.TO)
		}
	}
}
