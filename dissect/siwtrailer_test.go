package dissect_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/stretchr/testify/require"
)

// The two CRC errors siw 6.1.192 logged against iwarp-go's Read Responses
// in the interop lab (docs/interop.md, item 7), derived by hand: the field
// on the wire, how many of its octets the first socket buffer held, the
// last octet the previous FPDU left, and what siw compared.
func TestSiwTrailer_TheLabsTwoCRCErrors(t *testing.T) {
	for _, c := range []struct {
		wire         [4]byte
		split        int
		stale        byte
		read         [4]byte
		dmesgIn, own string
	}{
		// "siw: crc error. in: a91fd7f2, own f21fd788": 3 octets, then 1.
		{[4]byte{0x88, 0xd7, 0x1f, 0xf2}, 3, 0xa9, [4]byte{0xf2, 0xd7, 0x1f, 0xa9}, "a91fd7f2", "f21fd788"},
		// "siw: crc error. in: 3f884013, own 8840136f": 1 octet, then 3.
		{[4]byte{0x6f, 0x13, 0x40, 0x88}, 1, 0x3f, [4]byte{0x13, 0x40, 0x88, 0x3f}, "3f884013", "8840136f"},
	} {
		var tr dissect.SiwTrailer
		tr[7] = c.stale
		tr.Read(c.wire[:], c.split)
		got := tr.CRC()
		require.Equal(t, c.read, got)
		require.Equal(t, c.dmesgIn, fmt.Sprintf("%08x", binary.LittleEndian.Uint32(got[:])))
		require.Equal(t, c.own, fmt.Sprintf("%08x", binary.LittleEndian.Uint32(c.wire[:])), "pad 0: siw's own CRC is the right one")
	}
}

// With pad octets the second part lands in the pad too, so siw's own CRC
// is wrong as well; a field that arrives whole is read as sent.
func TestSiwTrailer_PadAndWhole(t *testing.T) {
	field := []byte{0, 0, 0xa1, 0xa2, 0xa3, 0xa4} // pad 2, CRC a1..a4
	var tr dissect.SiwTrailer
	tr[7] = 0xee
	tr.Read(field, 1) // [0] then [0 a1 a2 a3 a4] again from the start
	require.Equal(t, [4]byte{0xa2, 0xa3, 0xa4, 0xee}, tr.CRC())
	require.Equal(t, []byte{0, 0xa1}, tr.Pad(2))

	tr.Read(field, 0)
	require.Equal(t, [4]byte{0xa1, 0xa2, 0xa3, 0xa4}, tr.CRC())
	require.Equal(t, []byte{0, 0}, tr.Pad(2))
	tr.Read(field, len(field))
	require.Equal(t, [4]byte{0xa1, 0xa2, 0xa3, 0xa4}, tr.CRC())
}

// A capture whose frames split an FPDU's CRC field marks the FPDU and, on
// a CRC stream, notes the log line siw would write, computed here apart
// from the model: the second part first, then the first part's tail, then
// the previous FPDU's last CRC octet.
func TestDecode_SiwSplitCRCField(t *testing.T) {
	for _, split := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(split), func(t *testing.T) {
			down, ends := fpdus(t, mpa.WriterConfig{CRC: true},
				readResp(false, 0x1100, 0x1000, pattern(1000)), // 2 + 14 + 1000: pad 0
				readResp(false, 0x1100, 0x1000+1000, pattern(1000)),
				readResp(true, 0x1100, 0x1000+2000, pattern(1000)))
			cut := ends[1] - 4 + split // inside the second FPDU's CRC field
			segs := []seg{
				{capture.Up, frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, "")},
				{capture.Down, frame(t, mpa.KindReply, mpa.FlagCRC, irdord, "")},
			}
			segs = append(segs, chop(capture.Down, down, []int{ends[0], cut})...)
			d, err := dissect.DecodeFile(writeCapture(t, segs))
			require.NoError(t, err)
			s := d.Streams[0]
			require.Len(t, s.PDUs, 3)
			for i, p := range s.PDUs {
				require.Equal(t, dissect.CRCGood, p.CRC, "the CRCs on the wire are right")
				require.Zero(t, p.Pad)
				if i == 1 {
					require.Equal(t, split, p.TrailerSplit)
				} else {
					require.Zero(t, p.TrailerSplit, "FPDU %d", i)
				}
			}
			w, prev := down[ends[1]-4:ends[1]], down[ends[0]-4:ends[0]]
			read := make([]byte, 4)
			for i := range read {
				switch {
				case i < 4-split:
					read[i] = w[split+i] // the second part, copied to the start
				case i < split:
					read[i] = w[i] // what the second part left of the first
				default:
					read[i] = prev[i] // untouched since the previous FPDU
				}
			}
			want := fmt.Sprintf(`"siw: crc error. in: %08x, own %08x"`, binary.LittleEndian.Uint32(read),
				crc32.Checksum(down[ends[0]:ends[1]-4], crc32.MakeTable(crc32.Castagnoli)))
			require.Len(t, s.Notes, 1)
			require.Contains(t, s.Notes[0].Text, want)
			require.Contains(t, s.Notes[0].Text, fmt.Sprintf("(%d|%d octets)", split, 4-split))

			// Without CRC siw ignores the field: the split is marked, not noted.
			downNoCRC, endsNoCRC := fpdus(t, mpa.WriterConfig{},
				readResp(false, 0x1100, 0x1000, pattern(1000)), readResp(true, 0x1100, 0x1000+1000, pattern(1000)))
			segs = []seg{
				{capture.Up, frame(t, mpa.KindRequest, 0, irdord, "")},
				{capture.Down, frame(t, mpa.KindReply, 0, irdord, "")},
			}
			segs = append(segs, chop(capture.Down, downNoCRC, []int{endsNoCRC[0] - 4 + split})...)
			d, err = dissect.DecodeFile(writeCapture(t, segs))
			require.NoError(t, err)
			require.Equal(t, split, d.Streams[0].PDUs[0].TrailerSplit)
			require.Empty(t, d.Streams[0].Notes)
		})
	}
}
