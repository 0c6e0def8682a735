package dissect_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/pcaptap"
	"github.com/stretchr/testify/require"
)

func rdmaExchange(t *testing.T, tap *pcaptap.Tap) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spd, scq := conn.NewPD(), conn.NewCQ(16)
	sqp, err := spd.NewQP(scq, conn.QPCaps{})
	require.NoError(t, err)
	target, err := spd.Register(make([]byte, 200000), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	require.NoError(t, err)
	inbox, err := spd.Register(make([]byte, 256), conn.LocalWrite)
	require.NoError(t, err)
	require.NoError(t, sqp.PostRecv(conn.RecvWR{ID: 1, SGL: []conn.SGE{inbox.SGE(0, 256)}}))
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0", conn.WithCRC(conn.CRCRequired))
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, sqp) }()

	cpd, ccq := conn.NewPD(), conn.NewCQ(16)
	cqp, err := cpd.NewQP(ccq, conn.QPCaps{})
	require.NoError(t, err)
	require.NoError(t, cqp.Connect(ctx, "tcp", ln.Addr().String(), conn.WithCRC(conn.CRCRequired), conn.WithTap(tap)))
	require.NoError(t, <-accepted)
	buf, err := cpd.Register(make([]byte, 200000), conn.LocalWrite)
	require.NoError(t, err)
	for i := range buf.Bytes() {
		buf.Bytes()[i] = byte(i * 7)
	}
	require.NoError(t, cqp.PostSend(conn.SendWR{ID: 1, Op: conn.OpWrite, Flags: conn.Signaled,
		SGL: []conn.SGE{buf.SGE(0, 150000)}, Remote: target.Remote(0)}))
	require.NoError(t, cqp.PostSend(conn.SendWR{ID: 2, Op: conn.OpRead, Flags: conn.Signaled,
		SGL: []conn.SGE{buf.SGE(160000, 5000)}, Remote: target.Remote(1000)}))
	require.NoError(t, cqp.PostSend(conn.SendWR{ID: 3, Op: conn.OpSend, Flags: conn.Signaled,
		SGL: []conn.SGE{buf.SGE(0, 100)}}))
	wcs := make([]conn.WorkCompletion, 4)
	for done := 0; done < 3; {
		n, err := ccq.Wait(ctx, wcs)
		require.NoError(t, err)
		for _, wc := range wcs[:n] {
			require.NoError(t, wc.Err())
		}
		done += n
	}
	n, err := scq.Wait(ctx, wcs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, wcs[0].Err())
	require.Equal(t, buf.Bytes()[1000:6000], buf.Bytes()[160000:165000], "read back what was written")
	require.NoError(t, cqp.Close())
	require.NoError(t, sqp.Close())
}

// A capture written by pcaptap around a conn client/server pair doing an
// RDMA Write (several FPDUs, split across segments), an RDMA Read and a
// Send with CRC on decodes like tshark decodes it, with every CRC good and
// no malformed header.
func TestPcaptapConnPair_MatchTshark(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pair.pcap")
	f, err := os.Create(file)
	require.NoError(t, err)
	tap, err := pcaptap.New(f)
	require.NoError(t, err)
	rdmaExchange(t, tap)
	require.NoError(t, tap.Close())
	require.NoError(t, f.Close())

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
