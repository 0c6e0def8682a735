package dissect_test

import (
	"bytes"
	"net"
	"os"
	"testing"

	"github.com/google/gopacket"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/pcaptap"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// ulpduSeeds are ULPDUs of every opcode, built by the rdmap encoders.
func ulpduSeeds(t testing.TB) [][]byte {
	return [][]byte{
		send(1, "hello"), sendInv(2, 0xabcd01, "x"), send(3, ""),
		write(true, 0x100, 0x1000, pattern(40)), write(false, 1, 0, nil),
		readReq(1), readResp(true, 0x1100, 0x7f0000001000, pattern(9)), term(t),
		rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{Op: rdmap.AtomicCmpSwap, ID: 3, STag: 9, TO: 64, Args: rdmap.AtomicArgs{AddSwap: 1, AddSwapMask: ^uint64(0), CompareMask: ^uint64(0)}}),
		rdmap.AppendAtomicResponse(nil, 1, 3, 77), rdmap.AppendImmediate(nil, rdmap.OpImmediateSE, 4, 5),
		rdmap.AppendFlushRequest(nil, 2, rdmap.FlushRequestFields{ID: 1, STag: 9, Length: 8, Placement: rdmap.PlaceVisibility}),
		rdmap.AppendFlushResponse(nil, 1, rdmap.FlushResponseFields{ID: 1}),
	}
}

// An MPA Request or Reply that decodes serializes back to its octets.
func FuzzMPAFrameLayer(f *testing.F) {
	f.Add(frame(f, mpa.KindRequest, mpa.FlagCRC, irdord, "private"))
	f.Add(frame(f, mpa.KindReply, mpa.FlagReject, nil, ""))
	f.Add(frame(f, mpa.KindReply, mpa.FlagMarkers|mpa.FlagCRC, &mpa.IRDORD{IRD: 1, ORD: 1, P2P: true, RTR: mpa.RTRWrite}, "x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var l dissect.MPAFrame
		if l.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
			return
		}
		require.Equal(t, data, append(append([]byte(nil), l.Contents...), l.Payload...))
		buf := gopacket.NewSerializeBuffer()
		require.NoError(t, l.SerializeTo(buf, gopacket.SerializeOptions{}))
		require.Equal(t, l.Contents, buf.Bytes())
	})
}

// An FPDU that decodes serializes back to its octets, stale pad and CRC
// field included; with ComputeChecksums its CRC is valid.
func FuzzMPALayer(f *testing.F) {
	for _, u := range ulpduSeeds(f) {
		b, _ := fpdus(f, mpa.WriterConfig{CRC: true}, u)
		f.Add(b)
		b, _ = fpdus(f, mpa.WriterConfig{}, u, u)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var l dissect.MPA
		if l.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
			return
		}
		n := len(data) - len(l.Rest)
		require.Equal(t, mpa.FPDULen(int(l.ULPDULength)), n)
		buf := gopacket.NewSerializeBuffer()
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &l, gopacket.Payload(l.Payload)))
		require.Equal(t, data[:n], buf.Bytes())

		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &l, gopacket.Payload(l.Payload)))
		var again dissect.MPA
		require.NoError(t, again.DecodeFromBytes(buf.Bytes(), gopacket.NilDecodeFeedback))
		require.True(t, again.CRCValid)
	})
}

// A DDP segment whose DDP and RDMAP headers decode serializes back to its
// octets.
func FuzzDDPRDMAPLayers(f *testing.F) {
	for _, u := range ulpduSeeds(f) {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d dissect.DDP
		if d.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
			return
		}
		r := dissect.NewRDMAP(&d)
		if r.DecodeFromBytes(d.Payload, gopacket.NilDecodeFeedback) != nil {
			return
		}
		buf := gopacket.NewSerializeBuffer()
		ls := []gopacket.SerializableLayer{&d, r}
		if len(r.Payload) > 0 {
			ls = append(ls, gopacket.Payload(r.Payload))
		}
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...))
		require.Equal(t, data, buf.Bytes())
	})
}

// Any pair of byte streams decodes without panicking, and what comes out
// is consistent: FPDUs in stream order, inside the streams, contiguous
// from the end of the handshake, the last one possibly truncated.
func FuzzDecodeStreams(f *testing.F) {
	req := frame(f, mpa.KindRequest, mpa.FlagCRC, irdord, "")
	rep := frame(f, mpa.KindReply, mpa.FlagCRC, irdord, "")
	up, _ := fpdus(f, mpa.WriterConfig{CRC: true}, ulpduSeeds(f)...)
	down, _ := fpdus(f, mpa.WriterConfig{CRC: true}, ulpduSeeds(f)[:3]...)
	f.Add(append(req, up...), append(rep, down...))
	mreq := frame(f, mpa.KindRequest, mpa.FlagMarkers, irdord, "")
	mrep := frame(f, mpa.KindReply, mpa.FlagMarkers, irdord, "")
	mup, _ := fpdus(f, mpa.WriterConfig{Markers: true}, ulpduSeeds(f)...)
	f.Add(append(mreq, mup...), append(mrep, mup...))
	f.Add(req[:10], []byte{})
	f.Fuzz(func(t *testing.T, up, down []byte) {
		s := dissect.DecodeStreams(up, down)
		streams := [2][]byte{up, down}
		next := [2]int{}
		if s.Request != nil && s.State == dissect.StateEstablished {
			next[s.Initiator] = 20 + s.Request.PDLength
			next[1-s.Initiator] = 20 + s.Reply.PDLength
		}
		for i, p := range s.PDUs {
			require.Equal(t, next[p.Dir], p.Offset, "FPDU %d", i)
			require.Positive(t, p.Len)
			require.LessOrEqual(t, p.Offset+p.Len, len(streams[p.Dir]))
			if p.Truncated {
				require.Equal(t, len(streams[p.Dir]), p.Offset+p.Len)
			} else {
				require.Len(t, p.CRCField, 4)
				require.GreaterOrEqual(t, p.Len, mpa.FPDULen(p.ULPDULength))
			}
			next[p.Dir] = p.Offset + p.Len
		}
	})
}

// Any file decodes without panicking or allocating by its length fields.
func FuzzDecode(f *testing.F) {
	var tapped bytes.Buffer
	tap, err := pcaptap.New(&tapped)
	require.NoError(f, err)
	a, b := net.Pipe()
	ta := tap.Wrap(a)
	req := frame(f, mpa.KindRequest, 0, irdord, "")
	up, _ := fpdus(f, mpa.WriterConfig{}, ulpduSeeds(f)...)
	go func() {
		buf := make([]byte, len(req)+len(up))
		for n := 0; n < len(buf); {
			k, err := b.Read(buf[n:])
			if err != nil {
				return
			}
			n += k
		}
		b.Write(frame(f, mpa.KindReply, 0, irdord, ""))
		b.Close()
	}()
	ta.Write(req)
	ta.Write(up)
	buf := make([]byte, 64)
	ta.Read(buf)
	ta.Close()
	require.NoError(f, tap.Close())
	f.Add(tapped.Bytes())

	var w bytes.Buffer
	cw, err := capture.NewWriter(&w, nil)
	require.NoError(f, err)
	fl, err := cw.Open(capture.FlowConfig{Client: clientAddr, Server: serverAddr})
	require.NoError(f, err)
	require.NoError(f, fl.Segment(capture.Up, append(req, up[:50]...)))
	f.Add(w.Bytes())
	small, err := os.ReadFile(testutil.CapturePath(f, "rping-lo.pcap"))
	require.NoError(f, err)
	f.Add(small)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := dissect.Decode(bytes.NewReader(data))
		if err != nil {
			require.ErrorIs(t, err, dissect.ErrCapture)
			return
		}
		require.NoError(t, d.WriteText(&bytes.Buffer{}))
		require.NoError(t, d.WriteJSON(&bytes.Buffer{}))
	})
}
