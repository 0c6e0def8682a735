package pcaptap_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/dissect/tsharktest"
	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/pcaptap"
	"github.com/stretchr/testify/require"
)

// rdmaExchange connects a client and a server over loopback with the tap on
// the client, and runs an RDMA Write, an RDMA Read and a Send with CRC
// required. The Write is larger than one FPDU.
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

// A tapped conn client/server pair produces a capture that tshark reads as
// one MPA connection: the Request and Reply, every FPDU with a good CRC,
// no malformed packet and no TCP sequence or acknowledgement problem.
func TestTap_ConnPairTshark(t *testing.T) {
	tsharktest.Path(t)
	file := filepath.Join(t.TempDir(), "pair.pcap")
	f, err := os.Create(file)
	require.NoError(t, err)
	tap, err := pcaptap.New(f)
	require.NoError(t, err)
	rdmaExchange(t, tap)
	require.NoError(t, tap.Close())
	require.NoError(t, f.Close())

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
