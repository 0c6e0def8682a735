package waiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// side is one end of a loopback connection.
type side struct {
	qp *conn.QP
	cq *conn.CQ
	mr *conn.MR
}

func newSide(t testing.TB) *side {
	t.Helper()
	pd := conn.NewPD()
	s := &side{cq: conn.NewCQ(64)}
	var err error
	s.qp, err = pd.NewQP(s.cq, conn.QPCaps{})
	require.NoError(t, err)
	s.mr, err = pd.Register(make([]byte, 4096), conn.LocalWrite|conn.RemoteWrite|conn.RemoteRead)
	require.NoError(t, err)
	return s
}

func (s *side) recv(t testing.TB, id uint64) {
	t.Helper()
	require.NoError(t, s.qp.PostRecv(conn.RecvWR{ID: id, SGL: []conn.SGE{s.mr.SGE(0, 64)}}))
}

func (s *side) send(t testing.TB, id uint64, n int) {
	t.Helper()
	require.NoError(t, s.qp.PostSend(conn.SendWR{ID: id, Op: conn.OpSend, Flags: conn.Signaled, SGL: []conn.SGE{s.mr.SGE(0, n)}}))
}

// pair connects a client and a server over loopback; beforeAccept runs on
// the server's side before it accepts (to post receives).
func pair(t testing.TB, beforeAccept func(*side)) (cli, srv *side) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, srv = newSide(t), newSide(t)
	if beforeAccept != nil {
		beforeAccept(srv)
	}
	ln, err := conn.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(ctx, srv.qp) }()
	require.NoError(t, cli.qp.Connect(ctx, "tcp", ln.Addr().String()))
	require.NoError(t, <-accepted)
	t.Cleanup(func() {
		cli.qp.Close()
		srv.qp.Close()
	})
	return cli, srv
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor hands out completions by kind and keeps the others queued in
// order; Next then returns them oldest first.
func TestWaitFor_KeepsOtherKinds(t *testing.T) {
	cli, srv := pair(t, func(s *side) {
		s.recv(t, 100)
		s.recv(t, 101)
	})
	cli.recv(t, 1)
	cli.send(t, 2, 8)
	cli.send(t, 3, 8)
	srv.send(t, 200, 16) // the answer to the client's receive
	w := New(cli.cq, cli.qp)
	ctx := ctxT(t)
	wc, err := w.WaitFor(ctx, conn.WCRecv)
	require.NoError(t, err)
	require.Equal(t, uint64(1), wc.ID)
	require.Equal(t, uint32(16), wc.ByteLen)
	for _, id := range []uint64{2, 3} {
		wc, err := w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, conn.WCSend, wc.Op)
		require.Equal(t, id, wc.ID, "queued completions keep their order")
	}
}

// With nothing posted, the end of the connection is ErrEnded, which wraps
// the queue pair's cause; posted work comes back flushed. Both are Ended.
func TestNext_ConnectionEnds(t *testing.T) {
	cli, srv := pair(t, nil)
	w := New(cli.cq, cli.qp)
	require.NoError(t, srv.qp.Close())
	_, err := w.Next(ctxT(t))
	require.ErrorIs(t, err, ErrEnded)
	require.ErrorIs(t, err, cli.qp.Err())
	require.True(t, Ended(err))

	cli, srv = pair(t, nil)
	cli.recv(t, 7)
	w = New(cli.cq, cli.qp)
	require.NoError(t, srv.qp.Close())
	wc, err := w.Next(ctxT(t))
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, ErrEnded) && time.Now().Before(deadline); {
		// Done closed before the flush was pushed: the flushed receive
		// comes next.
		time.Sleep(time.Millisecond)
		wc, err = w.Next(ctxT(t))
	}
	require.Equal(t, uint64(7), wc.ID)
	require.Equal(t, conn.WCWRFlushErr, wc.Status)
	require.ErrorIs(t, err, conn.ErrFlushed)
	require.True(t, Ended(err))
	require.False(t, Ended(context.Canceled))
}

// Poll returns every ready completion; an unsuccessful one is an error.
// A cancelled context ends every wait.
func TestPoll(t *testing.T) {
	cli, srv := pair(t, func(s *side) {
		for i := range 3 {
			s.recv(t, uint64(i))
		}
	})
	for i := range 3 {
		cli.send(t, uint64(i), 4)
	}
	w := New(srv.cq, srv.qp)
	ctx := ctxT(t)
	got := 0
	for got < 3 {
		wcs, err := w.Poll(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, wcs)
		for _, wc := range wcs {
			require.Equal(t, conn.WCRecv, wc.Op)
			require.Equal(t, uint64(got), wc.ID)
			got++
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.Poll(cctx)
	require.ErrorIs(t, err, context.Canceled)
	_, err = w.WaitFor(cctx, conn.WCRecv)
	require.ErrorIs(t, err, context.Canceled)

	srv.recv(t, 9)
	require.NoError(t, cli.qp.Close())
	for {
		wcs, err := w.Poll(ctxT(t))
		if err != nil {
			require.True(t, Ended(err), "%v", err)
			break
		}
		require.Empty(t, wcs, "nothing but the flush is left")
	}
}

// Poll allocates nothing per call in steady state: the data path of the
// bench command relies on it.
func BenchmarkPoll(b *testing.B) {
	cli, srv := pair(b, nil)
	w := New(cli.cq, cli.qp)
	ctx := context.Background()
	wr := conn.SendWR{Op: conn.OpWrite, Flags: conn.Signaled, SGL: []conn.SGE{cli.mr.SGE(0, 8)}, Remote: srv.mr.Remote(0)}
	b.ReportAllocs()
	for b.Loop() {
		if err := cli.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Poll(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// mapContext is a context of an uncomparable type: == on two of them
// panics, so the waiter must not compare it with the one it saw before.
type mapContext struct {
	context.Context
	tags map[string]string
}

func TestWaitFor_UncomparableContext(t *testing.T) {
	cli, _ := pair(t, nil)
	w := New(cli.cq, cli.qp)
	defer func() {
		if w.waitStop != nil {
			w.waitStop()
		}
	}()
	for range 2 {
		ctx := mapContext{ctxT(t), map[string]string{"k": "v"}}
		require.NoError(t, w.contextFor(ctx).Err())
	}
	// And a comparable one is reused: no new context per wait.
	ctx := ctxT(t)
	require.Equal(t, w.contextFor(ctx), w.contextFor(ctx))
}
