//go:build linux || darwin || freebsd

package pmemsink

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
	"github.com/stretchr/testify/require"
)

// Every method writes, flushes and reads back through a served sink, and
// the file holds the bytes; the guarantee follows the sink's mode.
func TestRemote_EveryMethod(t *testing.T) {
	for _, mode := range []struct {
		name    string
		dir     func(testing.TB) string
		opts    []Option
		durable bool
	}{
		{"volatile", memDir, nil, false},
		{"msync-tmpfs", memDir, []Option{WithMode(ModeMsync)}, false},
		{"msync-disk", diskDir, []Option{WithMode(ModeMsync)}, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			path := tpath(mode.dir(t), "sink")
			s := openT(t, path, 1<<20, mode.opts...)
			require.Equal(t, mode.durable, s.Durable())
			x := serve(t, s, ServerConfig{})
			in := dialT(t, x.addr(), WithGPSPM())
			r := in.Remote()
			require.Equal(t, uint64(1<<20), r.Size)
			require.Equal(t, mode.durable, r.DirectWriteToPmem)
			want := rpma.UsageSink
			if mode.durable {
				want = rpma.UsageSinkPersistent
			}
			require.Equal(t, want, r.Usage)
			require.Equal(t, MethodExtension, in.Method(), "iwarp-go peers negotiate the Flush extension")

			ctx := tctx(t)
			rng := rand.New(rand.NewPCG(1, 2))
			for i, m := range []Method{MethodExtension, MethodGPSPM, MethodReadAfterWrite} {
				data := make([]byte, 10000+i)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				off := uint64(4096*(i+1)*10 + 3)
				require.NoError(t, in.Write(ctx, off, data))
				res, err := in.Flush(ctx, off, uint64(len(data)), UseMethod(m))
				require.NoError(t, err, m)
				require.Equal(t, m, res.Method)
				if mode.durable {
					require.Equal(t, Persistent, res.Guarantee, m)
				} else {
					require.Equal(t, Placed, res.Guarantee, m)
					_, err := in.Flush(ctx, off, uint64(len(data)), UseMethod(m), RequirePersistent())
					require.ErrorIs(t, err, ErrNotPersistent)
				}
				back := make([]byte, len(data))
				require.NoError(t, in.Read(ctx, off, back))
				require.Equal(t, data, back)
				file, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, file[off:off+uint64(len(data))]), "the file holds the bytes")
			}
			conns := x.srv.Conns()
			require.Len(t, conns, 1)
			st := conns[0].Stats()
			require.Equal(t, uint64(3), st.Writes)
			gpspm := uint64(1)
			if !mode.durable {
				gpspm = 2 // and the one that required persistence
			}
			require.Equal(t, gpspm, st.GPSPM)
			require.Positive(t, st.Persists)
		})
	}
}

// Dial fails clearly toward nothing listening and toward an iWARP peer
// that sends no region descriptor.
func TestRemote_DialFailures(t *testing.T) {
	_, err := Dial(tctx(t), "tcp", closedPort(t))
	require.Error(t, err)

	ln, err := conn.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	qp, err := conn.NewPD().NewQP(conn.NewCQ(8), conn.QPCaps{})
	require.NoError(t, err)
	defer qp.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- ln.Accept(context.Background(), qp) }()
	_, err = Dial(tctx(t), "tcp", ln.Addr().String())
	require.ErrorIs(t, err, rpma.ErrMalformed)
	require.ErrorContains(t, err, "sent no region descriptor")
	require.NoError(t, <-accepted)
}

// A flush its context interrupts leaves the initiator failed rather than
// let the late answer land in the next call.
func TestRemote_InterruptedFlushFailsTheInitiator(t *testing.T) {
	g := &gateShadow{gate: make(chan struct{})}
	s := gatedSink(t, g, 4)
	x := serve(t, s, ServerConfig{})
	in := dialT(t, x.addr(), WithGPSPM())
	ctx := tctx(t)
	require.NoError(t, in.Write(ctx, 0, []byte("held")))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := in.Flush(short, 0, 4, UseMethod(MethodGPSPM))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(g.gate) // the persist finishes; its answer arrives late
	_, err = in.Flush(ctx, 0, 4)
	require.ErrorContains(t, err, "initiator unusable")
	require.ErrorIs(t, in.Read(ctx, 0, make([]byte, 4)), context.DeadlineExceeded)
}

// WriteFlush is Write then Flush with the last Write and the flush's
// request posted together: the file holds the bytes when it returns, by
// every method, for one chunk or several, and the target persisted them.
// A flush that fails before it posts still lets the Write out.
func TestRemote_WriteFlush(t *testing.T) {
	path := tpath(memDir(t), "sink")
	s := openT(t, path, 1<<20, WithShadow(&recorder{}, ModeMsync))
	x := serve(t, s, ServerConfig{})
	in := dialT(t, x.addr(), WithGPSPM(), WithStaging(64<<10)) // chunks of 16 KiB
	ctx := tctx(t)
	rng := rand.New(rand.NewPCG(3, 4))
	off := uint64(5)
	for _, m := range []Method{MethodExtension, MethodGPSPM, MethodReadAfterWrite} {
		for _, n := range []int{1, 4096, 40000} {
			data := make([]byte, n)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			before := s.Stats()
			res, err := in.WriteFlush(ctx, off, data, UseMethod(m))
			require.NoError(t, err, "%v %d", m, n)
			require.Equal(t, m, res.Method)
			file, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, file[off:off+uint64(n)]), "%v %d: the file holds the bytes", m, n)
			after := s.Stats()
			require.Greater(t, after.Persists, before.Persists, "%v %d: the flush persisted", m, n)
			require.GreaterOrEqual(t, after.BytesPersisted-before.BytesPersisted, uint64(n), "%v %d", m, n)
			off += uint64(n) + 7
		}
	}

	bare := dialT(t, x.addr(), WithStaging(64<<10)) // no GPSPM receive
	data := []byte("held, then sent alone")
	_, err := bare.WriteFlush(ctx, 900000, data, UseMethod(MethodGPSPM))
	require.ErrorIs(t, err, ErrGPSPMNotDeclared)
	back := make([]byte, len(data))
	require.NoError(t, bare.Read(ctx, 900000, back))
	require.Equal(t, data, back, "the Write went out although the flush could not")
}
