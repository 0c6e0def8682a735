package rdmap_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// fpdu is one FPDU found in a capture.
type fpdu struct {
	frame            int // tshark frame number that completed it
	srcPort, dstPort uint16
	ulpdu            []byte
}

// captureFPDUs splits every MPA-accepted connection of a capture into
// FPDUs. No capture here negotiated markers (siw rejects them), so an FPDU
// is the ULPDU Length, the ULPDU, pad to 4 and the CRC field.
func captureFPDUs(t *testing.T, path string) []fpdu {
	t.Helper()
	conns, err := capture.ReadFile(path)
	require.NoError(t, err)
	var out []fpdu
	for _, c := range conns {
		req, n, err := mpa.ParseFrame(c.Up.Data)
		if err != nil {
			continue
		}
		rep, m, err := mpa.ParseFrame(c.Down.Data)
		if err != nil || rep.Flags&mpa.FlagReject != 0 {
			continue
		}
		if (req.Flags|rep.Flags)&mpa.FlagMarkers != 0 {
			continue // a harness reply with M set: siw refused it, no FPDUs follow
		}
		for _, dir := range []struct {
			s    *capture.Stream
			base int
		}{{c.Up, n}, {c.Down, m}} {
			data := dir.s.Data
			for off := dir.base; off+2 <= len(data); {
				l := int(binary.BigEndian.Uint16(data[off:]))
				total := 2 + l + (4-(2+l)%4)%4 + 4
				if off+total > len(data) {
					break
				}
				out = append(out, fpdu{
					frame:   dir.s.FrameAt(off + total - 1),
					srcPort: dir.s.Src.Port(),
					dstPort: dir.s.Dst.Port(),
					ulpdu:   data[off+2 : off+2+l],
				})
				off += total
			}
		}
	}
	return out
}

// fields renders one FPDU in the column order of the tshark command in
// testdata/README.md; absent fields are empty.
func fields(t *testing.T, f fpdu) []string {
	h, err := rdmap.Parse(f.ulpdu, len(f.ulpdu))
	require.NoError(t, err, "frame %d", f.frame)
	col := make([]string, 16)
	col[0] = fmt.Sprint(f.frame)
	col[1] = fmt.Sprint(f.srcPort)
	c := ddp.Control(f.ulpdu[0])
	col[2], col[3] = b01(c.Tagged()), b01(c.Last())
	col[4] = fmt.Sprintf("0x%02x", uint8(h.Op))
	if tg := h.Tagged(); tg != nil {
		col[5] = fmt.Sprintf("0x%08x", tg.STag())
		col[6] = fmt.Sprintf("0x%016x", tg.TO())
	} else {
		u := h.Untagged()
		col[7], col[8], col[9] = fmt.Sprint(u.QN()), fmt.Sprint(u.MSN()), fmt.Sprint(u.MO())
	}
	if rr := h.ReadRequest(); rr != nil {
		col[10] = fmt.Sprintf("0x%08x", rr.SinkSTag())
		col[11] = fmt.Sprintf("0x%016x", rr.SinkTO())
		col[12] = fmt.Sprint(rr.Size())
		col[13] = fmt.Sprintf("0x%08x", rr.SrcSTag())
		col[14] = fmt.Sprintf("0x%016x", rr.SrcTO())
	}
	if h.Op == rdmap.OpTerminate {
		rt, err := rdmap.ParseTerminate(f.ulpdu)
		require.NoError(t, err)
		col[15] = fmt.Sprintf("0x%02x", uint8(rt.RFC.Code.Layer()))
	}
	return col
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// render groups FPDUs by frame the way tshark aggregates repeated fields:
// each column joins the non-empty values of the frame's PDUs with ';'.
func render(t *testing.T, fs []fpdu) string {
	byFrame := map[int][][]string{}
	for _, f := range fs {
		byFrame[f.frame] = append(byFrame[f.frame], fields(t, f))
	}
	frames := make([]int, 0, len(byFrame))
	for fr := range byFrame {
		frames = append(frames, fr)
	}
	sort.Ints(frames)
	var sb strings.Builder
	for _, fr := range frames {
		rows := byFrame[fr]
		line := make([]string, 16)
		line[0] = rows[0][0]
		for i := 1; i < 16; i++ {
			var vals []string
			for _, r := range rows {
				if r[i] != "" && (i != 1 || len(vals) == 0) { // one port per frame
					vals = append(vals, r[i])
				}
			}
			line[i] = strings.Join(vals, ";")
		}
		sb.WriteString(strings.Join(line, " ") + "\n")
	}
	return sb.String()
}

// Every DDP/RDMAP header in the siw captures decodes to what tshark shows.
func TestGolden_SiwCaptures(t *testing.T) {
	for _, name := range testutil.SiwCaptures {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", name+".tshark.txt"))
			require.NoError(t, err)
			fs := captureFPDUs(t, testutil.CapturePath(t, name+".pcap"))
			require.NotEmpty(t, fs)
			require.Equal(t, string(want), render(t, fs))
		})
	}
}

// Every captured header re-encodes to the same bytes through the typed
// encoder for its opcode.
func TestGolden_ReEncode(t *testing.T) {
	for _, name := range testutil.SiwCaptures {
		for _, f := range captureFPDUs(t, testutil.CapturePath(t, name+".pcap")) {
			h, err := rdmap.Parse(f.ulpdu, len(f.ulpdu))
			require.NoError(t, err)
			var again []byte
			switch {
			case h.Op == rdmap.OpWrite:
				again = rdmap.AppendWrite(nil, h.Last, h.Tagged().STag(), h.Tagged().TO())
			case h.Op == rdmap.OpReadResponse:
				again = rdmap.AppendReadResponse(nil, h.Last, h.Tagged().STag(), h.Tagged().TO())
			case h.Op.IsSend():
				again = rdmap.AppendSend(nil, h.Op, h.Last, h.InvalidateSTag(), h.Untagged().MSN(), h.Untagged().MO())
			case h.Op == rdmap.OpReadRequest:
				again = rdmap.AppendReadRequest(nil, h.Untagged().MSN(), h.ReadRequest().Fields())
			case h.Op == rdmap.OpTerminate:
				rt, err := rdmap.ParseTerminate(f.ulpdu)
				require.NoError(t, err)
				again = rt.Append(nil)
			}
			require.Equal(t, f.ulpdu[:len(again)], again, "%s frame %d", name, f.frame)
			require.True(t, bytes.Equal(h.Bytes(), f.ulpdu[:h.Len]))
		}
	}
}

// The receive checks accept every stream siw produced or accepted: per
// direction, untagged MSN/MO sequencing on QN 0–2 and tagged continuity.
func TestGolden_ReceiveChecksAcceptSiwStreams(t *testing.T) {
	type dirKey struct{ src, dst uint16 }
	for _, name := range testutil.SiwCaptures {
		queues := map[dirKey]*ddp.UntaggedQueues{}
		tagged := map[dirKey]*ddp.TaggedReceiver{}
		conns := 0
		for _, f := range captureFPDUs(t, testutil.CapturePath(t, name+".pcap")) {
			k := dirKey{f.srcPort, f.dstPort}
			if queues[k] == nil {
				queues[k], tagged[k] = ddp.NewUntaggedQueues(rdmap.NumQueues), new(ddp.TaggedReceiver)
				conns++
			}
			h, err := rdmap.Parse(f.ulpdu, len(f.ulpdu))
			require.NoError(t, err)
			if tg := h.Tagged(); tg != nil {
				s, err := tagged[k].Receive(tg, len(f.ulpdu))
				require.NoError(t, err, "%s frame %d", name, f.frame)
				require.Equal(t, !h.IsWriteRTR(), s.Lookup, "%s frame %d", name, f.frame)
				continue
			}
			_, err = queues[k].Receive(h.Untagged(), len(f.ulpdu), 1<<20)
			require.NoError(t, err, "%s frame %d", name, f.frame)
		}
		require.NotZero(t, conns)
	}
}

// The two Terminates siw sent in mpa-host-client.pcap (frames 242 and 257,
// listed in mpa-host-client-host.txt), decoded with both readings.
func TestGolden_SiwTerminates(t *testing.T) {
	var terms []rdmap.ReceivedTerminate
	var frames []int
	for _, f := range captureFPDUs(t, testutil.CapturePath(t, "mpa-host-client.pcap")) {
		if h, err := rdmap.Parse(f.ulpdu, len(f.ulpdu)); err == nil && h.Op == rdmap.OpTerminate {
			rt, err := rdmap.ParseTerminate(f.ulpdu)
			require.NoError(t, err)
			terms, frames = append(terms, rt), append(frames, f.frame)
		}
	}
	require.Equal(t, []int{242, 257}, frames)

	crc := terms[0] // round 20: CRC corrupted on a CRC-on stream
	require.True(t, crc.Conforming())
	require.Equal(t, [4]byte{0x02, 0x02, 0x00, 0x00}, crc.Control)
	require.Equal(t, termcode.Code(0x0202), crc.RFC.Code, "what tshark shows: RDMA / Remote Operation / 0x02")
	require.Equal(t, rdmap.LayoutSIW, crc.Layout)
	require.Equal(t, termcode.MPACRC, crc.Code())
	require.False(t, crc.SegmentLenPresent)

	stag := terms[1] // round 21: Read Response to an unknown STag
	require.Equal(t, [4]byte{0x11, 0x00, 0x03, 0x00}, stag.Control)
	require.Equal(t, rdmap.LayoutSIW, stag.Layout)
	require.Equal(t, termcode.DDPTaggedInvalidSTag, stag.Code())
	rd := stag.Chosen()
	require.True(t, rd.M && rd.D && !rd.R)
	require.Equal(t, uint16(64), stag.SegmentLen, "siw reports the payload length")
	th, ok := ddp.ParseTagged(stag.DDPHeader)
	require.True(t, ok)
	require.Equal(t, uint32(0x3e739b00), th.STag())
	require.Equal(t, uint64(0x564f606d5550), th.TO())
	require.Equal(t, byte(0x42), th.RsvdULP(), "the offending message was a Read Response")

	te := stag.Err()
	require.True(t, te.Remote)
	require.ErrorIs(t, te, &rdmap.TerminateError{Remote: true, Code: termcode.DDPTaggedInvalidSTag})
}
