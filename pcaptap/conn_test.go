package pcaptap_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect/tsharktest"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/stretchr/testify/require"
)

// A tapped conn client/server pair produces a capture that tshark reads as
// one MPA connection: the Request and Reply, every FPDU with a good CRC,
// no malformed packet and no TCP sequence or acknowledgement problem.
func TestTap_ConnPairTshark(t *testing.T) {
	tsharktest.Path(t)
	file := conntest.RecordExchange(t)

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	conns, err := capture.Read(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.True(t, conns[0].Up.FIN && conns[0].Down.FIN)

	require.Empty(t, tsharktest.Fields(t, file, "tcp.analysis.flags || _ws.malformed || _ws.expert.severity >= error", "frame.number", "_ws.expert.message"))
	rows := tsharktest.Fields(t, file, "iwarp_mpa", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.crc_flag", "iwarp_rdma.opcode")
	require.NotEmpty(t, rows)
	require.NotEmpty(t, rows[0][0], "the Request opens the capture")
	require.NotEmpty(t, rows[1][1], "then the Reply")
	ops := map[string]bool{}
	for _, r := range rows[2:] {
		for _, op := range strings.Split(r[3], ",") {
			ops[op] = true
		}
	}
	for _, op := range []string{"0x00", "0x01", "0x02", "0x03"} { // Write, Read Request, Read Response, Send
		require.True(t, ops[op], "opcode %s in %v", op, ops)
	}
	var good int
	for _, p := range tsharktest.PDUs(t, file) {
		if p.DDP == nil {
			continue
		}
		c, ok := p.MPA["iwarp_mpa.crc_check"]
		require.True(t, ok, "frame %d: CRC checked", p.Frame)
		require.Contains(t, c.ShowName, "(Good CRC32)", "frame %d", p.Frame)
		good++
	}
	require.Greater(t, good, 4)
}
