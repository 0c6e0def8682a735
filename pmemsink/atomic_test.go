//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/stretchr/testify/require"
)

// An RFC 7306 atomic into a served region is counted dirty like a Write,
// so that the Flush after it persists it (and leaves nothing dirty).
func TestAtomic_CountedDirtyThenFlushed_RFC7306(t *testing.T) {
	s := openT(t, tpath(memDir(t), "sink"), 1<<16)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spd := conn.NewPD()
	reg, err := s.Register(spd, 0, 0, conn.RemoteWrite|conn.RemoteAtomic)
	require.NoError(t, err)
	defer reg.Close()
	sqp, err := spd.NewQP(conn.NewCQ(16), conn.QPCaps{})
	require.NoError(t, err)
	defer sqp.Close()
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, sqp) }()
	cpd := conn.NewPD()
	ccq := conn.NewCQ(16)
	cqp, err := cpd.NewQP(ccq, conn.QPCaps{})
	require.NoError(t, err)
	defer cqp.Close()
	require.NoError(t, cqp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-errc)
	res, err := cpd.Register(make([]byte, 8), conn.LocalWrite)
	require.NoError(t, err)

	wait := func(op conn.WCOpcode) conn.WorkCompletion {
		t.Helper()
		var wc [1]conn.WorkCompletion
		_, err := ccq.Wait(ctx, wc[:])
		require.NoError(t, err)
		require.NoError(t, wc[0].Err())
		require.Equal(t, op, wc[0].Op)
		return wc[0]
	}
	const off = 4096 + 64
	require.NoError(t, cqp.PostSend(conn.SendWR{Op: conn.OpFetchAdd, Flags: conn.Signaled, SGL: []conn.SGE{res.SGE(0, 8)},
		Remote: reg.MR().Remote(off), Atomic: conn.FetchAdd(7)}))
	wait(conn.WCFetchAdd)
	require.Equal(t, uint64(7), reg.MR().LoadUint64(off))
	dirty := reg.gt.tr.Dirty(nil)
	require.NotEmpty(t, dirty)
	covered := false
	for _, r := range dirty {
		covered = covered || (r.Off <= off && r.Off+r.Len >= off+8)
	}
	require.True(t, covered, "the atomic's word is dirty: %v", dirty)

	require.NoError(t, cqp.PostSend(conn.SendWR{Op: conn.OpFlush, Flags: conn.Signaled, Remote: reg.MR().Remote(off), FlushLength: 8}))
	wait(conn.WCFlush)
	require.Empty(t, reg.gt.tr.Dirty(nil), "the flush took the atomic's range")
}
