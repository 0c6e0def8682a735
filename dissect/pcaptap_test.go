package dissect_test

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/stretchr/testify/require"
)

// A capture written by pcaptap around a conn client/server pair doing an
// RDMA Write (several FPDUs, split across segments), an RDMA Read and a
// Send with CRC on decodes like tshark decodes it, with every CRC good and
// no malformed header.
func TestPcaptapConnPair_MatchTshark(t *testing.T) {
	file := conntest.RecordExchange(t)

	d := compareWithTshark(t, file)
	require.Len(t, d.Streams, 1)
	s := d.Streams[0]
	require.Equal(t, dissect.StateEstablished, s.State)
	require.Empty(t, s.Notes)
	ops := map[string]int{}
	for _, p := range s.PDUs {
		require.Equal(t, dissect.CRCGood, p.CRC, "%+v", p)
		require.Empty(t, p.Error)
		ops[p.Op]++
	}
	require.Equal(t, map[string]int{"RDMA Write": 4, "RDMA Read Request": 1, "RDMA Read Response": 1, "Send": 1}, ops,
		"the RTR (a zero-length Write), three Write segments, the Read and the Send")
}
