// Package conntest holds test helpers shared by packages: a real iwarp-go
// connection to observe (capture taps, decoders), a buffer a test reads
// while a program writes to it, and the parser of the "KEY k=v" report
// lines that iwtest and the interop scenarios print.
package conntest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pcaptap"
	"github.com/stretchr/testify/require"
)

// RecordExchange runs RDMAExchange with a pcaptap tap on the client and
// returns the path of the finished capture, in t's temporary directory.
func RecordExchange(t testing.TB) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pair.pcap")
	f, err := os.Create(file)
	require.NoError(t, err)
	tap, err := pcaptap.New(f)
	require.NoError(t, err)
	RDMAExchange(t, tap)
	require.NoError(t, tap.Close())
	require.NoError(t, f.Close())
	return file
}

// RDMAExchange connects a client and a server over loopback with the tap on
// the client, and runs an RDMA Write, an RDMA Read and a Send with CRC
// required. The Write is larger than one FPDU.
func RDMAExchange(t testing.TB, tap conn.Tap) {
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
