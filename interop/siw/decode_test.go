//go:build interop

package siw_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What `iwarp-peer decode --json` reports, as far as the scenarios read it
// (the fields of package dissect's report).
type decoded struct {
	Streams []*decodedStream `json:"streams"`
}

type decodedStream struct {
	Index      int         `json:"index"`
	State      string      `json:"state"`
	Initiator  string      `json:"initiator"`
	Request    *decodedMPA `json:"request"`
	Reply      *decodedMPA `json:"reply"`
	Directions [2]struct {
		CRC   bool `json:"crc"`
		FPDUs int  `json:"fpdus"`
		Hole  bool `json:"hole"`
	} `json:"directions"`
	PDUs  []*decodedFPDU `json:"fpdus"`
	Notes []struct {
		Frame int    `json:"frame"`
		Text  string `json:"text"`
	} `json:"notes"`
}

type decodedMPA struct {
	Rev      int    `json:"rev"`
	C        bool   `json:"c"`
	R        bool   `json:"r"`
	Enhanced bool   `json:"enhanced"`
	AppData  string `json:"app_data"`
	// PrivateData is all PD_Length octets, the IRD/ORD block included.
	PrivateData string `json:"private_data"`
	IRDORD      *struct {
		IRD int    `json:"ird"`
		ORD int    `json:"ord"`
		P2P bool   `json:"p2p"`
		RTR string `json:"rtr"`
	} `json:"ird_ord"`
	Error string `json:"error"`
}

type decodedFPDU struct {
	Dir         string  `json:"dir"`
	Frames      []int   `json:"frames"`
	CRC         string  `json:"crc"`
	Truncated   bool    `json:"truncated"`
	Tagged      bool    `json:"tagged"`
	Last        bool    `json:"last"`
	Opcode      int     `json:"opcode"`
	Op          string  `json:"op"`
	STag        *string `json:"stag"`
	TO          *string `json:"to"`
	ULPDULength int     `json:"ulpdu_length"`
	PayloadLen  int     `json:"payload_len"`
	ReadRequest *struct {
		Size int `json:"size"`
	} `json:"read_request"`
	Terminate *struct {
		Control string `json:"control"`
		Layout  string `json:"layout"`
	} `json:"terminate"`
	Error string `json:"error"`
}

// decodeCapture runs `iwarp-peer decode --json` on a capture.
func decodeCapture(t *testing.T, pcap string) *decoded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, peerBin, "decode", pcap, "--json")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "iwarp-peer decode %s: %s", pcap, stderr.String())
	var d decoded
	require.NoError(t, json.Unmarshal(out, &d))
	return &d
}

// wire is what a capture of one iWARP connection shows.
type wire struct {
	*decodedStream
	all   *decoded
	tsh   *wireCheck
	ops   map[string]int // by "up/down op"
	first map[string]*decodedFPDU
}

// firstFPDU is the first FPDU the side that sends in direction dir sent.
func (w *wire) firstFPDU(dir string) *decodedFPDU { return w.first[dir] }

// fromInitiator and fromResponder name the directions of the stream.
func (w *wire) fromInitiator() string { return w.Initiator }
func (w *wire) fromResponder() string {
	if w.Initiator == "up" {
		return "down"
	}
	return "up"
}

// requireDecodes checks a capture holding one iWARP connection with
// `iwarp-peer decode`: the MPA exchange, every FPDU whole and well formed,
// with a good CRC where CRC was negotiated (crc) and none checked where it
// was not, no findings. tshark cross-checks: no malformed frame, no bad
// CRC, and as many good CRCs as iwarp-peer decode found.
func requireDecodes(t *testing.T, pcap string, crc bool) *wire {
	t.Helper()
	d := decodeCapture(t, pcap)
	require.Len(t, d.Streams, 1, "one TCP connection in %s", pcap)
	s := d.Streams[0]
	w := &wire{decodedStream: s, all: d, ops: map[string]int{}, first: map[string]*decodedFPDU{}}
	require.Equal(t, "established", s.State, "%s", pcap)
	require.NotNil(t, s.Request)
	require.NotNil(t, s.Reply)
	assert.Empty(t, s.Request.Error, "MPA Request")
	assert.Empty(t, s.Reply.Error, "MPA Reply")
	assert.Equal(t, crc, s.Reply.C, "the Reply's C bit decides the CRC")
	for i := range s.Directions {
		assert.Equal(t, crc, s.Directions[i].CRC, "direction %d CRC", i)
		assert.False(t, s.Directions[i].Hole, "direction %d has a gap: the capture missed bytes", i)
	}
	for _, n := range s.Notes {
		assert.Failf(t, "decode note", "frame %d: %s", n.Frame, n.Text)
	}
	good := 0
	for _, p := range s.PDUs {
		assert.False(t, p.Truncated, "truncated FPDU at frames %v", p.Frames)
		assert.Empty(t, p.Error, "FPDU at frames %v (%s)", p.Frames, p.Op)
		want := "absent"
		if crc {
			want = "good"
			good++
		}
		assert.Equal(t, want, p.CRC, "CRC of the FPDU at frames %v (%s)", p.Frames, p.Op)
		w.ops[p.Dir+" "+p.Op]++
		if w.first[p.Dir] == nil {
			w.first[p.Dir] = p
		}
	}
	require.NotEmpty(t, s.PDUs, "FPDUs in %s", pcap)
	w.tsh = checkWire(t, pcap)
	assert.Zero(t, w.tsh.malformed, "tshark: malformed frames in %s", pcap)
	assert.Zero(t, w.tsh.badCRC, "tshark: bad CRCs in %s", pcap)
	assert.Equal(t, good, w.tsh.goodCRC, "good CRCs: iwarp-peer decode and tshark agree")
	return w
}
