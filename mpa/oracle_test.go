package mpa

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// segmentWriter collects what a Writer flushes, one FPDU per Flush, so each
// FPDU becomes one TCP segment (tshark's marker code needs that).
func fpduSegments(t *testing.T, cfg WriterConfig, specs []fpduSpec) [][]byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, cfg)
	var segs [][]byte
	for _, s := range specs {
		require.NoError(t, w.WriteFPDU(s.hdr, s.payload))
		require.NoError(t, w.Flush())
		segs = append(segs, bytes.Clone(buf.Bytes()))
		buf.Reset()
	}
	return segs
}

// tsharkFPDU is what tshark reports for one FPDU.
type tsharkFPDU struct {
	frame    int
	srcPort  int
	ulpdu    int
	fpduptrs []int
}

// tsharkArgs makes tshark find MPA by its heuristic and leave Send
// payloads alone (the RPC-over-RDMA heuristic would grab them).
func tsharkArgs(path string, extra ...string) []string {
	return append([]string{"-r", path, "-o", "tcp.desegment_tcp_streams:TRUE",
		"--enable-heuristic", "iwarp_mpa_tcp", "--disable-heuristic", "rpcrdma_iwarp"}, extra...)
}

// tsharkFPDUs lists the FPDUs tshark decodes and fails the test on any
// malformed frame.
func tsharkFPDUs(t *testing.T, tshark, path string) []tsharkFPDU {
	t.Helper()
	out, err := exec.Command(tshark, tsharkArgs(path, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "tcp.srcport", "-e", "iwarp_mpa.ulpdulength",
		"-e", "iwarp_mpa.marker_fpduptr", "-e", "_ws.malformed")...).Output()
	require.NoError(t, err)
	var res []tsharkFPDU
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		require.Len(t, f, 5, line)
		require.Empty(t, f[4], "frame %s is malformed", f[0])
		if f[2] == "" {
			continue
		}
		var r tsharkFPDU
		r.frame, _ = strconv.Atoi(f[0])
		r.srcPort, _ = strconv.Atoi(f[1])
		r.ulpdu, _ = strconv.Atoi(f[2])
		if f[3] != "" {
			for _, p := range strings.Split(f[3], ",") {
				v, err := strconv.Atoi(p)
				require.NoError(t, err)
				r.fpduptrs = append(r.fpduptrs, v)
			}
		}
		res = append(res, r)
	}
	return res
}

// tsharkCRCVerdicts counts tshark's "Good CRC32" and "Bad CRC32" verdicts.
func tsharkCRCVerdicts(t *testing.T, tshark, path string) (good, bad int) {
	t.Helper()
	out, err := exec.Command(tshark, tsharkArgs(path, "-V", "-O", "iwarp_mpa")...).Output()
	require.NoError(t, err)
	return strings.Count(string(out), "(Good CRC32)"), strings.Count(string(out), "(Bad CRC32")
}

// The tshark oracle for markers: a capture with the MPA Request and Reply
// (so tshark finds the stream) and one FPDU per TCP segment (tshark's
// marker code assumes that), FPDUs starting at every possible alignment
// (see alignmentSpecs for the one layout tshark 4.0 mis-parses).
// tshark must find every FPDU, report no malformed frame, find the markers
// where the model puts them with the FPDUPTRs the model computes, and judge
// every CRC good (it includes the markers in the CRC).
func TestMarkers_TsharkOracle(t *testing.T) {
	tshark := testutil.RequireTool(t, "tshark")

	up, starts := alignmentSpecs(t, true)
	require.Len(t, starts, markerInterval/4-1, "every alignment is present")
	down := []fpduSpec{{hdr: tagged(7, 0), payload: bytes.Repeat([]byte{1}, 1500)}, {hdr: tagged(7, 1500), payload: []byte("x")}}

	// Both sides set M: tshark assumes markers in both directions as soon
	// as either side asked, so both directions carry them here.
	ini := &Config{RequestMarkers: true, CRC: CRCRequired, IRD: 1, ORD: 1}
	resp := &Config{RequestMarkers: true, IRD: 1, ORD: 1}
	req, err := BuildRequest(ini, nil)
	require.NoError(t, err)
	rep, res, err := AnswerRequest(resp, &req, nil)
	require.NoError(t, err)
	require.True(t, res.SendMarkers && res.RecvMarkers && res.CRC)

	const clientPort, serverPort = 40000, 40001
	var file bytes.Buffer
	cw, err := capture.NewWriter(&file, nil)
	require.NoError(t, err)
	flow, err := cw.Open(capture.FlowConfig{
		Client: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), clientPort),
		Server: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.2"), serverPort),
	})
	require.NoError(t, err)
	reqB, err := AppendFrame(nil, &req)
	require.NoError(t, err)
	repB, err := AppendFrame(nil, &rep)
	require.NoError(t, err)
	require.NoError(t, flow.Segment(capture.Up, reqB))
	require.NoError(t, flow.Segment(capture.Down, repB))
	cfg := WriterConfig{CRC: true, Markers: true}
	upSegs, downSegs := fpduSegments(t, cfg, up), fpduSegments(t, cfg, down)
	for i, s := range upSegs {
		require.NoError(t, flow.Segment(capture.Up, s))
		if i < len(downSegs) {
			require.NoError(t, flow.Segment(capture.Down, downSegs[i]))
		}
	}
	require.NoError(t, flow.Close())
	path := filepath.Join(t.TempDir(), "markers.pcap")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))

	wantUp, _, _ := refMarkers(fpduLens(up))
	wantDown, _, _ := refMarkers(fpduLens(down))
	var gotUp, gotDown []tsharkFPDU
	for _, g := range tsharkFPDUs(t, tshark, path) {
		if g.srcPort == clientPort {
			gotUp = append(gotUp, g)
		} else {
			gotDown = append(gotDown, g)
		}
	}
	for _, dir := range []struct {
		name  string
		specs []fpduSpec
		want  [][]int
		got   []tsharkFPDU
	}{{"up", up, wantUp, gotUp}, {"down", down, wantDown, gotDown}} {
		require.Len(t, dir.got, len(dir.specs), "%s: tshark found every FPDU", dir.name)
		for i, g := range dir.got {
			require.Equal(t, len(dir.specs[i].hdr)+len(dir.specs[i].payload), g.ulpdu, "%s FPDU %d (frame %d)", dir.name, i, g.frame)
			require.Equal(t, dir.want[i], g.fpduptrs, "%s FPDU %d (frame %d): markers and FPDUPTRs", dir.name, i, g.frame)
		}
	}
	good, bad := tsharkCRCVerdicts(t, tshark, path)
	require.Zero(t, bad)
	require.Equal(t, len(up)+len(down), good)
}
