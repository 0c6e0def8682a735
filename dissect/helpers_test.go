package dissect_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/google/gopacket/pcapgo"
	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// frame encodes an MPA Request or Reply with mpa's encoder.
func frame(t testing.TB, kind mpa.Kind, flags mpa.Flags, ird *mpa.IRDORD, pd string) []byte {
	t.Helper()
	f := mpa.Frame{Kind: kind, Flags: flags, Rev: 2, PrivateData: []byte(pd)}
	if ird != nil {
		f.Flags |= mpa.FlagEnhanced
		f.HasIRDORD, f.IRDORD = true, *ird
	} else {
		f.Rev = 1
	}
	b, err := mpa.AppendFrame(nil, &f)
	require.NoError(t, err)
	return b
}

// fpdus frames ULPDUs with mpa.Writer and returns the stream and each
// FPDU's end offset in it.
func fpdus(t testing.TB, cfg mpa.WriterConfig, ulpdus ...[]byte) ([]byte, []int) {
	t.Helper()
	var buf bytes.Buffer
	w := mpa.NewWriter(&buf, cfg)
	var ends []int
	for _, u := range ulpdus {
		require.NoError(t, w.WriteFPDU(nil, u))
		require.NoError(t, w.Flush())
		ends = append(ends, buf.Len())
	}
	return buf.Bytes(), ends
}

func send(msn uint32, payload string) []byte {
	return append(rdmap.AppendSend(nil, rdmap.OpSend, true, 0, msn, 0), payload...)
}

func sendInv(msn, inv uint32, payload string) []byte {
	return append(rdmap.AppendSend(nil, rdmap.OpSendSEInvalidate, true, inv, msn, 0), payload...)
}

func write(last bool, stag uint32, to uint64, payload []byte) []byte {
	return append(rdmap.AppendWrite(nil, last, stag, to), payload...)
}

func readReq(msn uint32) []byte {
	return rdmap.AppendReadRequest(nil, msn, rdmap.ReadRequestFields{
		SinkSTag: 0x1100, SinkTO: 0x7f0000001000, Size: 4096, SrcSTag: 0x2200, SrcTO: 0x55aa00002000})
}

func readResp(last bool, stag uint32, to uint64, payload []byte) []byte {
	return append(rdmap.AppendReadResponse(nil, last, stag, to), payload...)
}

func term(t testing.TB) []byte {
	hdr := ddp.AppendTagged(nil, ddp.MakeControl(true, true), rdmap.MakeControl(rdmap.OpWrite), 0xdead00, 0x40)
	return rdmap.AppendTerminate(nil, &rdmap.Terminate{
		Code: termcode.DDPTaggedInvalidSTag, HasSegmentLen: true, SegmentLen: 78, DDPHeader: hdr})
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + 5)
	}
	return b
}

// seg is one TCP segment of a synthetic capture.
type seg struct {
	dir  capture.Dir
	data []byte
}

var (
	clientAddr = netip.MustParseAddrPort("10.1.0.1:40000")
	serverAddr = netip.MustParseAddrPort("10.1.0.2:7174")
)

// writeCapture writes one TCP connection carrying segs and returns the
// file's path.
func writeCapture(t testing.TB, segs []seg) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, nil)
	require.NoError(t, err)
	f, err := w.Open(capture.FlowConfig{Client: clientAddr, Server: serverAddr})
	require.NoError(t, err)
	for _, s := range segs {
		require.NoError(t, f.Segment(s.dir, s.data))
	}
	require.NoError(t, f.Close())
	path := filepath.Join(t.TempDir(), "synthetic.pcap")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// chop splits b at the given ends (offsets into b), dropping empty pieces.
func chop(dir capture.Dir, b []byte, ends []int) []seg {
	var out []seg
	start := 0
	for _, e := range append(ends, len(b)) {
		e = min(e, len(b))
		if e > start {
			out = append(out, seg{dir, b[start:e]})
			start = e
		}
	}
	return out
}

// dropFrame rewrites the capture at path without frame n (1-based), as if
// the capture had missed it.
func dropFrame(t testing.TB, path string, n int) {
	t.Helper()
	in, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := pcapgo.NewReader(bytes.NewReader(in))
	require.NoError(t, err)
	var out bytes.Buffer
	w := pcapgo.NewWriterNanos(&out)
	require.NoError(t, w.WriteFileHeader(r.Snaplen(), r.LinkType()))
	for i := 1; ; i++ {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if i != n {
			require.NoError(t, w.WritePacket(ci, data))
		}
	}
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
}
