package dissect_test

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// The siw captures' MPA ports, registered for per-packet decoding ("decode
// as"); the registration is global, so it happens once for the package.
func init() {
	for _, p := range []uint16{7174, 17177, 18515, 18517} {
		dissect.RegisterTCPPort(p)
	}
}

// Per-packet decoding with gopacket.NewPacket agrees with the stream
// decoder on every FPDU that starts a segment and ends in it, and on every
// Request and Reply.
func TestLayers_PerPacketAgreesWithStream(t *testing.T) {
	for _, name := range testutil.SiwCaptures {
		t.Run(name, func(t *testing.T) {
			file := testutil.CapturePath(t, name+".pcap")
			d, err := dissect.DecodeFile(file)
			require.NoError(t, err)
			byFrame := map[int][]*dissect.FPDU{}
			frames := map[int]*dissect.Handshake{}
			for _, s := range d.Streams {
				for _, f := range s.PDUs {
					if len(f.Frames) == 1 {
						byFrame[f.Frames[0]] = append(byFrame[f.Frames[0]], f)
					}
				}
				for _, h := range []*dissect.Handshake{s.Request, s.Reply} {
					if h != nil && len(h.Frames) == 1 {
						frames[h.Frames[0]] = h
					}
				}
			}
			checked := 0
			for n, data := range readFrames(t, file) {
				pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{DecodeStreamsAsDatagrams: true})
				if h := frames[n]; h != nil {
					l, ok := pkt.Layer(dissect.LayerTypeMPAFrame).(*dissect.MPAFrame)
					require.True(t, ok, "frame %d: %v", n, pkt)
					require.Equal(t, h.Kind == "request", l.Kind == mpa.KindRequest)
					require.Equal(t, uint8(h.Flags), uint8(l.Flags))
					require.Equal(t, h.Rev, l.Rev)
					require.Equal(t, []byte(h.PrivateData), l.PrivateData)
					require.Equal(t, h.Error == "", l.Err == nil)
					checked++
					continue
				}
				fs := byFrame[n]
				if len(fs) == 0 {
					continue
				}
				// The first FPDU through NewPacket, the others from Rest
				// through a DecodingLayerParser. Every FPDU in these
				// captures starts a segment.
				m, ok := pkt.Layer(dissect.LayerTypeMPA).(*dissect.MPA)
				require.True(t, ok, "frame %d: %v", n, pkt)
				checkLayers(t, n, fs[0], m, pkt.Layer(dissect.LayerTypeDDP).(*dissect.DDP), pkt.Layer(dissect.LayerTypeRDMAP).(*dissect.RDMAP))
				checked++
				rest := m.Rest
				var m2 dissect.MPA
				var d2 dissect.DDP
				r2 := dissect.NewRDMAP(&d2)
				var pl gopacket.Payload
				parser := gopacket.NewDecodingLayerParser(dissect.LayerTypeMPA, &m2, &d2, r2, &pl)
				var decoded []gopacket.LayerType
				for _, f := range fs[1:] {
					require.NoError(t, parser.DecodeLayers(rest, &decoded), "frame %d", n)
					checkLayers(t, n, f, &m2, &d2, r2)
					rest = m2.Rest
					checked++
				}
			}
			require.Greater(t, checked, 5)
		})
	}
}

func checkLayers(t *testing.T, frame int, f *dissect.FPDU, m *dissect.MPA, d *dissect.DDP, r *dissect.RDMAP) {
	t.Helper()
	require.Equal(t, uint16(f.ULPDULength), m.ULPDULength, "frame %d", frame)
	require.Equal(t, []byte(f.CRCField), m.CRC[:], "frame %d", frame)
	require.Equal(t, f.CRC == dissect.CRCGood, m.CRCValid && f.CRC != dissect.CRCAbsent, "frame %d", frame)
	require.Len(t, m.Pad, f.Pad)
	require.Equal(t, f.Tagged, d.Tagged(), "frame %d", frame)
	require.Equal(t, f.Last, d.Last(), "frame %d", frame)
	if f.STag != nil {
		require.Equal(t, uint32(*f.STag), d.STag)
		require.Equal(t, uint64(*f.TO), d.TO)
	} else {
		require.Equal(t, []uint32{*f.QN, *f.MSN, *f.MO}, []uint32{d.QN, d.MSN, d.MO})
	}
	require.Equal(t, f.Op, r.Op.String(), "frame %d", frame)
	if rr := f.ReadRequest; rr != nil {
		require.Equal(t, rdmap.ReadRequestFields{SinkSTag: uint32(rr.SinkSTag), SinkTO: uint64(rr.SinkTO), Size: rr.Size,
			SrcSTag: uint32(rr.SrcSTag), SrcTO: uint64(rr.SrcTO)}, r.ReadRequest)
	}
	if f.Terminate != nil {
		require.NotNil(t, r.Terminate)
		require.Equal(t, []byte(f.Terminate.Control), r.Terminate.Control[:])
		require.Equal(t, []byte(f.Terminate.Raw), r.LayerContents())
	}
	require.Len(t, r.LayerPayload(), f.PayloadLen, "frame %d", frame)
}

// A stack serialized through the layers is the FPDU mpa.Writer and the
// rdmap encoders produce, and decodes back to the same fields.
func TestLayers_SerializeDecodeRoundTrip(t *testing.T) {
	payload := pattern(37)
	stacks := []struct {
		name  string
		ddp   dissect.DDP
		rdmap dissect.RDMAP
		want  []byte // the ULPDU as the encoders build it
	}{
		{"write", dissect.DDP{Control: ddp.MakeControl(true, true), RsvdULP: rdmap.MakeControl(rdmap.OpWrite), STag: 0x1234, TO: 0x8000},
			dissect.RDMAP{Op: rdmap.OpWrite}, write(true, 0x1234, 0x8000, payload)},
		{"send-inv", dissect.DDP{Control: ddp.MakeControl(false, true), RsvdULP: rdmap.MakeControl(rdmap.OpSendSEInvalidate), RsvdULPWord: 0xabcd01, MSN: 3},
			dissect.RDMAP{Op: rdmap.OpSendSEInvalidate}, sendInv(3, 0xabcd01, string(payload))},
		{"read-request", dissect.DDP{Control: ddp.MakeControl(false, true), RsvdULP: rdmap.MakeControl(rdmap.OpReadRequest), QN: 1, MSN: 1},
			dissect.RDMAP{Op: rdmap.OpReadRequest, ReadRequest: rdmap.ReadRequestFields{SinkSTag: 0x1100, SinkTO: 0x7f0000001000, Size: 4096, SrcSTag: 0x2200, SrcTO: 0x55aa00002000}},
			readReq(1)},
	}
	for _, c := range stacks {
		t.Run(c.name, func(t *testing.T) {
			buf := gopacket.NewSerializeBuffer()
			ls := []gopacket.SerializableLayer{&dissect.MPA{}, &c.ddp, &c.rdmap}
			if c.rdmap.Op != rdmap.OpReadRequest {
				ls = append(ls, gopacket.Payload(payload))
			}
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
			want, _ := fpdus(t, mpa.WriterConfig{CRC: true}, c.want)
			require.Equal(t, want, buf.Bytes())

			var m dissect.MPA
			var d dissect.DDP
			r := dissect.NewRDMAP(&d)
			var pl gopacket.Payload
			parser := gopacket.NewDecodingLayerParser(dissect.LayerTypeMPA, &m, &d, r, &pl)
			var decoded []gopacket.LayerType
			require.NoError(t, parser.DecodeLayers(buf.Bytes(), &decoded))
			require.True(t, m.CRCValid)
			require.Equal(t, c.ddp.STag, d.STag)
			require.Equal(t, c.ddp.MSN, d.MSN)
			require.Equal(t, c.rdmap.Op, r.Op)
			require.Equal(t, c.rdmap.ReadRequest, r.ReadRequest)
			if c.rdmap.Op == rdmap.OpSendSEInvalidate {
				require.Equal(t, uint32(0xabcd01), r.InvalidateSTag)
			}

			// Decoded layers serialize back to the same octets without
			// recomputing anything.
			again := gopacket.NewSerializeBuffer()
			ls = []gopacket.SerializableLayer{&m, &d, r}
			if len(r.Payload) > 0 {
				ls = append(ls, gopacket.Payload(r.Payload))
			}
			require.NoError(t, gopacket.SerializeLayers(again, gopacket.SerializeOptions{}, ls...))
			require.Equal(t, buf.Bytes(), again.Bytes())
		})
	}
}

// A Terminate decodes with both readings and re-encodes exactly.
func TestLayers_RFC5040_4_Terminate(t *testing.T) {
	fpdu, _ := fpdus(t, mpa.WriterConfig{}, term(t))
	pkt := gopacket.NewPacket(fpdu, dissect.LayerTypeMPA, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	r := pkt.Layer(dissect.LayerTypeRDMAP).(*dissect.RDMAP)
	require.Equal(t, rdmap.OpTerminate, r.Op)
	require.Equal(t, termcode.DDPTaggedInvalidSTag, r.Terminate.Code())
	require.Equal(t, rdmap.LayoutRFC, r.Terminate.Layout)
	require.Empty(t, r.LayerPayload())

	buf := gopacket.NewSerializeBuffer()
	m := pkt.Layer(dissect.LayerTypeMPA).(*dissect.MPA)
	d := pkt.Layer(dissect.LayerTypeDDP).(*dissect.DDP)
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, m, d, r))
	require.Equal(t, fpdu, buf.Bytes())
}

// Bad input is an error carrying what a receiver would answer, never a
// panic.
func TestLayers_Errors(t *testing.T) {
	df := gopacket.NilDecodeFeedback

	var m dissect.MPA
	require.ErrorIs(t, m.DecodeFromBytes([]byte{0, 40, 1, 2}, df), dissect.ErrTruncated)
	require.ErrorIs(t, m.DecodeFromBytes(frame(t, mpa.KindRequest, 0, irdord, ""), df), dissect.ErrIsFrame)

	var f dissect.MPAFrame
	require.ErrorIs(t, f.DecodeFromBytes([]byte("MPA ID Bad Frame...."), df), dissect.ErrNotFrame)
	require.ErrorIs(t, f.DecodeFromBytes(frame(t, mpa.KindReply, 0, irdord, "pd")[:22], df), dissect.ErrTruncated)
	rev3 := frame(t, mpa.KindRequest, 0, nil, "")
	rev3[17] = 3
	require.NoError(t, f.DecodeFromBytes(rev3, df), "decoded leniently")
	require.Nil(t, f.Frame)
	require.ErrorIs(t, f.Err, mpa.ErrRevision)

	var d dissect.DDP
	bad := send(1, "x")
	bad[0] = 0x42 // DDP version 2
	err := d.DecodeFromBytes(bad, df)
	var de *ddp.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, termcode.DDPUntaggedVersion, de.Code)

	opc := send(1, "x")
	opc[1] = 0x4c // opcode 0xC: unassigned
	require.NoError(t, d.DecodeFromBytes(opc, df))
	err = dissect.NewRDMAP(&d).DecodeFromBytes(d.Payload, df)
	c, ok := termcode.Of(err)
	require.True(t, ok)
	require.Equal(t, termcode.RDMAPUnexpectedOpcode, c)

	var alone dissect.RDMAP
	require.ErrorIs(t, alone.DecodeFromBytes(nil, df), dissect.ErrNoDDP)
	require.NoError(t, d.DecodeFromBytes(send(1, "abc"), df))
	require.ErrorIs(t, dissect.NewRDMAP(&d).DecodeFromBytes([]byte("abc"), df), dissect.ErrNoDDP, "not the DDP layer's payload")

	pkt := gopacket.NewPacket([]byte{1, 2, 3}, dissect.LayerTypeRDMAP, gopacket.Default)
	require.NotNil(t, pkt.ErrorLayer())
}
