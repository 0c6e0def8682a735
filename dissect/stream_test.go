package dissect_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

var irdord = &mpa.IRDORD{IRD: 4, ORD: 4}

// FPDUs cut anywhere (inside the length field, the header, the CRC) and
// several FPDUs in one segment decode the same as tshark decodes them:
// the stream decoder frames by mpa.Reader, not by segments (RFC 5044 §4
// does not align FPDUs with TCP segments on the receive side).
func TestStream_RFC5044_4_SplitAndMergedFPDUs(t *testing.T) {
	up, _ := fpdus(t, mpa.WriterConfig{CRC: true},
		write(false, 0x100, 0x1000, pattern(3000)), write(true, 0x100, 0x1000+3000, pattern(17)),
		send(1, "hello"), readReq(1), send(2, ""), sendInv(3, 0xabcd01, "x"))
	down, _ := fpdus(t, mpa.WriterConfig{CRC: true},
		readResp(true, 0x1100, 0x7f0000001000, pattern(4096)), send(1, "done"), term(t))
	rng := rand.New(rand.NewPCG(7, 7))
	cuts := func(b []byte) []int {
		var out []int
		for off := 0; off < len(b); {
			off += 1 + rng.IntN(700)
			out = append(out, off)
		}
		return out
	}
	segs := []seg{
		{capture.Up, frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, "")},
		{capture.Down, frame(t, mpa.KindReply, mpa.FlagCRC, irdord, "")},
	}
	u, d := chop(capture.Up, up, cuts(up)), chop(capture.Down, down, cuts(down))
	for len(u)+len(d) > 0 { // interleave the directions
		if len(u) > 0 {
			segs, u = append(segs, u[0]), u[1:]
		}
		if len(d) > 0 && rng.IntN(2) == 0 {
			segs, d = append(segs, d[0]), d[1:]
		}
	}
	file := writeCapture(t, segs)
	ds := compareWithTshark(t, file)
	s := ds.Streams[0]
	require.Empty(t, s.Notes)
	require.Len(t, s.PDUs, 9)
	for _, p := range s.PDUs {
		require.Equal(t, dissect.CRCGood, p.CRC)
	}
	require.Equal(t, 6, s.Directions[dissect.Up].FPDUs)
	require.Equal(t, 3, s.Directions[dissect.Down].FPDUs)
}

// Markers (RFC 5044 §4.3) are removed: each 512 octets of a stream whose
// receiver asked for them (its M bit) carry a marker, which the FPDU's
// length, offsets and CRC account for. tshark removes markers only when
// each FPDU has a segment of its own, so the capture is cut that way; it
// also removes them from both directions as soon as either side asked, so
// it is the oracle only when both did.
func TestStream_RFC5044_5_Markers(t *testing.T) {
	// The responder's M bit asks for markers in the initiator's stream,
	// and the other way round.
	for _, c := range []struct {
		name               string
		reqFlags, repFlags mpa.Flags
	}{
		{"both", mpa.FlagMarkers | mpa.FlagCRC, mpa.FlagMarkers | mpa.FlagCRC},
		{"down only", mpa.FlagMarkers, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			upMarkers, downMarkers := c.repFlags&mpa.FlagMarkers != 0, c.reqFlags&mpa.FlagMarkers != 0
			crc := c.repFlags&mpa.FlagCRC != 0
			up, upEnds := fpdus(t, mpa.WriterConfig{CRC: crc, Markers: upMarkers},
				send(1, "a"), write(true, 7, 0, pattern(1500)), send(2, string(pattern(600))), readReq(1), send(3, "z"))
			down, downEnds := fpdus(t, mpa.WriterConfig{CRC: crc, Markers: downMarkers},
				readResp(true, 0x1100, 0x7f0000001000, pattern(1200)), send(1, "b"), send(2, string(pattern(509))))
			segs := []seg{
				{capture.Up, frame(t, mpa.KindRequest, c.reqFlags, irdord, "")},
				{capture.Down, frame(t, mpa.KindReply, c.repFlags, irdord, "")},
			}
			segs = append(segs, chop(capture.Up, up, upEnds)...)
			segs = append(segs, chop(capture.Down, down, downEnds)...)
			file := writeCapture(t, segs)
			var ds *dissect.Dissection
			if upMarkers == downMarkers {
				ds = compareWithTshark(t, file)
			} else {
				var err error
				ds, err = dissect.DecodeFile(file)
				require.NoError(t, err)
				require.Len(t, ds.Streams[0].PDUs, 8)
			}
			s := ds.Streams[0]
			require.Empty(t, s.Notes)
			require.Equal(t, upMarkers, s.Directions[dissect.Up].Markers)
			require.Equal(t, downMarkers, s.Directions[dissect.Down].Markers)
			var upLen, downLen, markers int
			for _, p := range s.PDUs {
				if p.Dir == dissect.Up {
					upLen += p.Len
				} else {
					downLen += p.Len
				}
				markers += p.Markers
			}
			require.Equal(t, len(up), upLen, "the FPDUs cover the stream, markers included")
			require.Equal(t, len(down), downLen)
			want := 0
			if upMarkers {
				want += (len(up) + 511) / 512
			}
			if downMarkers {
				want += (len(down) + 511) / 512
			}
			require.Equal(t, want, markers)
		})
	}
}

func findStream(t *testing.T, d *dissect.Dissection, clientPort uint16) *dissect.Stream {
	t.Helper()
	for _, s := range d.Streams {
		if s.Client.Port() == clientPort {
			return s
		}
	}
	t.Fatalf("no stream from client port %d", clientPort)
	return nil
}

// How far setup got, from the siw harness capture that tries every case.
func TestStream_RFC5044_7_1_SetupOutcomes(t *testing.T) {
	d, err := dissect.DecodeFile(testutil.CapturePath(t, "mpa-host-client.pcap"))
	require.NoError(t, err)
	require.Len(t, d.Streams, 21)

	rej := findStream(t, d, 43176) // Request with M; siw rejects
	require.Equal(t, dissect.StateRejected, rej.State)
	require.True(t, rej.Request.M)
	require.True(t, rej.Reply.R)
	require.Empty(t, rej.PDUs)

	short := findStream(t, d, 50378) // enhanced with PD_Length 2
	require.Equal(t, dissect.StateRejected, short.State)
	require.Contains(t, short.Request.Error, "IRD/ORD block")
	require.Nil(t, short.Request.IRDORD)

	rev3 := findStream(t, d, 50380) // revision 3: siw closes without a Reply
	require.Equal(t, dissect.StateRequestOnly, rev3.State)
	require.Equal(t, uint8(3), rev3.Request.Rev)
	require.Contains(t, rev3.Request.Error, "revision")
	require.Contains(t, rev3.Notes[0].Text, "no MPA Reply")

	none := findStream(t, d, 36510) // not MPA at all
	require.Equal(t, dissect.StateNoHandshake, none.State)
	require.Nil(t, none.Request)
	require.NotEmpty(t, none.Notes)

	p2p := findStream(t, d, 43170) // RFC 6581: P2P with a Write RTR
	require.Equal(t, dissect.StateEstablished, p2p.State)
	require.Equal(t, &dissect.IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: "Write|Read|Send"}, p2p.Request.IRDORD)
	require.Equal(t, &dissect.IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: "Write"}, p2p.Reply.IRDORD)
	require.True(t, p2p.Directions[dissect.Up].CRC)
	require.Equal(t, "RDMA Write", p2p.PDUs[0].Op)
	require.Zero(t, p2p.PDUs[0].PayloadLen)
}

// A bad CRC is reported with the value it should have, and siw's
// Terminate for it is read both ways: siw's x86 layout says LLP/MPA CRC
// error, the RFC layout something else.
func TestStream_RFC5044_4_CRCAndSiwTerminate(t *testing.T) {
	d, err := dissect.DecodeFile(testutil.CapturePath(t, "mpa-host-client.pcap"))
	require.NoError(t, err)
	s := findStream(t, d, 53488)
	require.Len(t, s.PDUs, 2)
	bad, trm := s.PDUs[0], s.PDUs[1]
	require.Equal(t, []int{241}, bad.Frames)
	require.Equal(t, dissect.CRCBad, bad.CRC)
	require.Equal(t, dissect.Bytes{0x83, 0xfe, 0x5b, 0x46}, bad.CRCField)
	require.Equal(t, dissect.Bytes{0x7c, 0xfe, 0x5b, 0x46}, bad.CRCComputed)

	require.Equal(t, dissect.CRCGood, trm.CRC)
	tm := trm.Terminate
	require.NotNil(t, tm)
	require.Equal(t, dissect.Bytes{0x02, 0x02, 0x00, 0x00}, tm.Control)
	require.Equal(t, dissect.Reading{Layer: 2, EType: 0, Code: 2, Name: tm.SIW.Name}, tm.SIW)
	require.Contains(t, tm.SIW.Name, "CRC")
	require.Equal(t, uint8(0), tm.RFC.Layer)
	require.Equal(t, uint8(2), tm.RFC.EType)
	require.Equal(t, "siw little-endian layout", tm.Layout)
	require.True(t, tm.Conforming)
	require.Zero(t, trm.PayloadLen)
}

// A capture that starts after the MPA exchange cannot be framed: it is
// reported as such, not guessed at.
func TestStream_MissingHandshake(t *testing.T) {
	up, _ := fpdus(t, mpa.WriterConfig{}, send(1, "a"), send(2, "b"))
	file := writeCapture(t, []seg{{capture.Up, up}})
	d, err := dissect.DecodeFile(file)
	require.NoError(t, err)
	s := d.Streams[0]
	require.Equal(t, dissect.StateNoHandshake, s.State)
	require.Empty(t, s.PDUs)
	require.Contains(t, s.Notes[0].Text, "no MPA Request")

	// Without the Reply the options of neither direction are known.
	file = writeCapture(t, []seg{{capture.Up, frame(t, mpa.KindRequest, 0, irdord, "")}, {capture.Up, up}})
	d, err = dissect.DecodeFile(file)
	require.NoError(t, err)
	s = d.Streams[0]
	require.Equal(t, dissect.StateRequestOnly, s.State)
	require.Empty(t, s.PDUs)
	require.Len(t, s.Notes, 2)
	require.Contains(t, s.Notes[1].Text, "not decoded")
}

// A capture that ends inside an FPDU, or misses a segment, yields the
// FPDUs before the gap, the torn one marked truncated, and a note.
func TestStream_TruncatedAndHoles(t *testing.T) {
	up, ends := fpdus(t, mpa.WriterConfig{CRC: true}, send(1, "first"), write(true, 9, 0, pattern(2000)), send(2, "third"))
	hs := []seg{
		{capture.Up, frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, "")},
		{capture.Down, frame(t, mpa.KindReply, mpa.FlagCRC, irdord, "")},
	}
	// Ends inside the Write.
	s := dissect.DecodeStreams(append(frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, ""), up[:ends[0]+100]...),
		frame(t, mpa.KindReply, mpa.FlagCRC, irdord, ""))
	require.Equal(t, dissect.StateEstablished, s.State)
	require.Len(t, s.PDUs, 2)
	require.False(t, s.PDUs[0].Truncated)
	require.True(t, s.PDUs[1].Truncated)
	require.Equal(t, dissect.CRCMissing, s.PDUs[1].CRC)
	require.Equal(t, "RDMA Write", s.PDUs[1].Op, "the header was captured")
	require.Equal(t, 100, s.PDUs[1].Len)
	require.Equal(t, 1, s.Directions[dissect.Up].FPDUs)
	require.Contains(t, s.Notes[0].Text, "ends inside this FPDU")

	// A lost segment in the middle: what follows it is not decoded.
	file := writeCapture(t, append(hs, chop(capture.Up, up, []int{ends[0], ends[0] + 700})...))
	dropFrame(t, file, 7) // the Write's first 700 octets
	d, err := dissect.DecodeFile(file)
	require.NoError(t, err)
	st := d.Streams[0]
	require.True(t, st.Directions[dissect.Up].Hole)
	require.Len(t, st.PDUs, 1)
	require.Equal(t, "Send", st.PDUs[0].Op)
	require.Contains(t, st.Notes[0].Text, "misses segments")

	// Ends inside the length field.
	s = dissect.DecodeStreams(append(frame(t, mpa.KindRequest, 0, irdord, ""), up[:ends[0]+1]...),
		frame(t, mpa.KindReply, 0, irdord, ""))
	require.Len(t, s.PDUs, 1)
	require.Contains(t, s.Notes[0].Text, "length field")
}

// Header errors are reported with the Terminate a receiver sends, and the
// receive-side sequencing checks of package ddp flag what siw would refuse.
func TestStream_HeaderErrorsAndReceiveChecks(t *testing.T) {
	bogus := send(1, "x")
	bogus[1] = 0x4d // RDMAP version 1, opcode 0xD: unassigned
	up, _ := fpdus(t, mpa.WriterConfig{}, send(1, "a"), send(3, "skips MSN 2"), bogus)
	s := dissect.DecodeStreams(append(frame(t, mpa.KindRequest, 0, irdord, ""), up...), frame(t, mpa.KindReply, 0, irdord, ""))
	require.Len(t, s.PDUs, 3)
	require.Empty(t, s.PDUs[1].Error, "a well-formed header")
	require.Contains(t, s.PDUs[2].Error, "(0/2/0x06)", "unexpected opcode")
	require.Equal(t, uint8(0xd), s.PDUs[2].Opcode)
	require.Len(t, s.Notes, 1)
	require.Contains(t, s.Notes[0].Text, "(1/2/0x03)", "MSN out of range")
}

// The decoder reads its own JSON and text forms without trouble, and the
// text names what matters.
func TestStream_TextAndJSON(t *testing.T) {
	d, err := dissect.DecodeFile(testutil.CapturePath(t, "mpa-host-client.pcap"))
	require.NoError(t, err)
	var text, js bytes.Buffer
	require.NoError(t, d.WriteText(&text))
	require.NoError(t, d.WriteJSON(&js))
	for _, want := range []string{
		"stream 19: 10.0.2.2:53488 → 10.0.2.15:7174, first frame 234: established",
		"frame 241        up   Send L QN 0 MSN 1 MO 0 · ULPDU 34, payload 16 · CRC bad (field 83fe5b46, computed 7cfe5b46)",
		"siw reading LLP MPA Error: MPA CRC Error (2/0/0x02)",
		"MPA Request rev 3",
	} {
		require.Contains(t, text.String(), want)
	}
	for _, want := range []string{`"state": "rejected"`, `"crc": "bad"`, `"crc_field": "83fe5b46"`, `"stag": "0x00002222"`} {
		require.Contains(t, js.String(), want)
	}
}

// A capture goes on past a bad CRC (a connection stops there, RFC 5044
// §8; a decoder reports every FPDU): the FPDUs after it are framed and
// checked as usual, and only the corrupted one is reported bad.
func TestStream_RFC5044_4_4_FPDUsAfterABadCRC(t *testing.T) {
	up, _ := fpdus(t, mpa.WriterConfig{CRC: true},
		send(1, "first"), write(true, 0x100, 0x1000, pattern(300)), send(2, "after"), readReq(1))
	first := mpa.FPDULen(len(send(1, "first")))
	corrupt := bytes.Clone(up)
	corrupt[first+40] ^= 0x10 // inside the Write's payload
	segs := []seg{
		{capture.Up, frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, "")},
		{capture.Down, frame(t, mpa.KindReply, mpa.FlagCRC, irdord, "")},
		{capture.Up, corrupt},
	}
	d, err := dissect.DecodeFile(writeCapture(t, segs))
	require.NoError(t, err)
	s := d.Streams[0]
	require.Len(t, s.PDUs, 4)
	require.Equal(t, []dissect.CRCStatus{dissect.CRCGood, dissect.CRCBad, dissect.CRCGood, dissect.CRCGood},
		[]dissect.CRCStatus{s.PDUs[0].CRC, s.PDUs[1].CRC, s.PDUs[2].CRC, s.PDUs[3].CRC})
	require.Equal(t, "RDMA Write", s.PDUs[1].Op)
	require.NotEqual(t, s.PDUs[1].CRCField, s.PDUs[1].CRCComputed)
	require.Equal(t, "Send", s.PDUs[2].Op)
	require.Equal(t, "RDMA Read Request", s.PDUs[3].Op)
	require.Equal(t, 4, s.Directions[dissect.Up].FPDUs)
}

// RFC 7306 messages are decoded with their fields (dissect accepts every
// extension rdmap knows): an Atomic Request and its Response, Immediate
// Data with SE.
func TestStream_RFC7306Messages(t *testing.T) {
	req := rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{Op: rdmap.AtomicCmpSwap, ID: 7, STag: 0x1122, TO: 0x1000,
		Args: rdmap.AtomicArgs{AddSwap: 5, AddSwapMask: ^uint64(0), Compare: 4, CompareMask: ^uint64(0)}})
	imm := rdmap.AppendImmediate(nil, rdmap.OpImmediateSE, 1, 0xabcdef)
	resp := rdmap.AppendAtomicResponse(nil, 1, 7, 4)
	up, _ := fpdus(t, mpa.WriterConfig{}, req, imm)
	down, _ := fpdus(t, mpa.WriterConfig{}, resp)
	s := dissect.DecodeStreams(append(frame(t, mpa.KindRequest, 0, irdord, ""), up...), append(frame(t, mpa.KindReply, 0, irdord, ""), down...))
	got := s.PDUs
	require.Len(t, got, 3)
	var ar, im, rs *dissect.FPDU
	for _, f := range got {
		require.Empty(t, f.Error, "%+v", f)
		switch f.Op {
		case "Atomic Request":
			ar = f
		case "Immediate Data with Solicited Event":
			im = f
		case "Atomic Response":
			rs = f
		}
	}
	require.NotNil(t, ar)
	require.Equal(t, dissect.AtomicRequest{Op: "CmpSwap", ID: 7, STag: 0x1122, TO: 0x1000, AddSwap: 5, AddSwapMask: dissect.Hex64(^uint64(0)), Compare: 4, CompareMask: dissect.Hex64(^uint64(0))}, *ar.AtomicRequest)
	require.NotNil(t, im)
	require.Equal(t, dissect.Hex64(0xabcdef), *im.Immediate)
	require.NotNil(t, rs)
	require.Equal(t, dissect.AtomicResponse{ID: 7, Orig: 4}, *rs.AtomicResponse)
}

// A capture with RFC 7306 atomics (FetchAdd, CmpSwap and their responses)
// and Immediate Data decodes as tshark decodes it, field by field (tshark
// shows no field of Immediate Data but its opcode).
func TestStream_RFC7306_Tshark(t *testing.T) {
	fa := rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 7, STag: 0x1122, TO: 0x1000, Args: rdmap.AtomicArgs{AddSwap: 5, CompareMask: ^uint64(0)}})
	cs := rdmap.AppendAtomicRequest(nil, 2, rdmap.AtomicRequestFields{Op: rdmap.AtomicCmpSwap, ID: 8, STag: 0x1122, TO: 0x1008, Args: rdmap.AtomicArgs{AddSwap: 9, AddSwapMask: ^uint64(0), Compare: 3, CompareMask: ^uint64(0)}})
	up, upEnds := fpdus(t, mpa.WriterConfig{CRC: true}, fa, cs, rdmap.AppendImmediate(nil, rdmap.OpImmediate, 1, 0x55))
	down, downEnds := fpdus(t, mpa.WriterConfig{CRC: true}, rdmap.AppendAtomicResponse(nil, 1, 7, 42), rdmap.AppendAtomicResponse(nil, 2, 8, 3))
	segs := []seg{
		{capture.Up, frame(t, mpa.KindRequest, mpa.FlagCRC, irdord, "")},
		{capture.Down, frame(t, mpa.KindReply, mpa.FlagCRC, irdord, "")},
	}
	segs = append(segs, chop(capture.Up, up, upEnds)...)
	segs = append(segs, chop(capture.Down, down, downEnds)...)
	ds := compareWithTshark(t, writeCapture(t, segs))
	s := ds.Streams[0]
	require.Len(t, s.PDUs, 5)
	for _, p := range s.PDUs {
		require.Empty(t, p.Error)
		require.Equal(t, dissect.CRCGood, p.CRC)
	}
}
