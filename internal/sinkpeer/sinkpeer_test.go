//go:build linux || darwin || freebsd

package sinkpeer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/pmemsink"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveT runs Serve on a free loopback port until the test ends and
// returns the port and the server's output.
func serveT(t *testing.T, cfg SinkConfig) (int, *testutil.Buffer, func() error) {
	t.Helper()
	out := &testutil.Buffer{}
	cfg.Addr, cfg.Port, cfg.Out = "127.0.0.1", 0, out
	ready := make(chan int, 1)
	cfg.Ready = func(a net.Addr) { ready <- a.(*net.TCPAddr).Port }
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg) }()
	var port int
	select {
	case port = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel(context.Canceled)
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return port, out, stop
}

func peer(port int) PeerConfig { return PeerConfig{Addr: "127.0.0.1", Port: port} }

// put writes data at off with each method and get reads it back: exactly
// the bytes on stdout, the report on stderr; the sink's account names
// each connection and ends with one line.
func TestServePutGet(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sink")
	port, out, stop := serveT(t, SinkConfig{File: file, Size: 4 << 20, Mode: pmemsink.ModeMsync})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 1))
	for i, m := range []pmemsink.Method{pmemsink.MethodAuto, pmemsink.MethodExtension, pmemsink.MethodGPSPM, pmemsink.MethodReadAfterWrite} {
		data := make([]byte, 1+rng.IntN(3<<20))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		off := uint64(rng.IntN(4<<20 - len(data)))
		var perr bytes.Buffer
		require.NoError(t, Put(ctx, PutConfig{PeerConfig: peer(port), Offset: off, Src: bytes.NewReader(data), Method: m, Err: &perr}))
		want := m
		if m == pmemsink.MethodAuto {
			want = pmemsink.MethodExtension
		}
		require.Contains(t, perr.String(), want.String(), "put %d reports its method", i)
		require.Contains(t, perr.String(), "durable")

		var got, gerr bytes.Buffer
		require.NoError(t, Get(ctx, GetConfig{PeerConfig: peer(port), Offset: off, Length: uint64(len(data)), Out: &got, Err: &gerr}))
		require.True(t, bytes.Equal(data, got.Bytes()), "get %d: exactly the bytes put", i)
		require.Contains(t, gerr.String(), "get: ")
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, b[off:off+uint64(len(data))]), "the file holds them")
	}
	var perr bytes.Buffer
	err := Put(ctx, PutConfig{PeerConfig: peer(port), Offset: 4<<20 - 2, Src: strings.NewReader("abc"), Err: &perr})
	require.ErrorIs(t, err, pmemsink.ErrRange)
	require.NoError(t, stop())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Contains(t, lines[0], "sink: msync on file "+file)
	require.Contains(t, out.String(), "conn 1 from 127.0.0.1:")
	require.Regexp(t, `STag 0x[0-9a-f]{8}, 4 MiB region`, out.String())
	require.Regexp(t, `usage 0x39 \(READ_SRC\|WRITE_DST\|FLUSH_TYPE_VISIBILITY\|FLUSH_TYPE_PERSISTENT\), direct_write_to_pmem 1`, out.String())
	require.Regexp(t, `conn 1 closed: [0-9.]+ [KM]iB written in \d+ placements, \d+ persists`, out.String())
	require.Regexp(t, `^sink: stopped \(context canceled\): 9 connections, [0-9.]+ MiB written, \d+ persists; region persisted \(msync\)$`, lines[len(lines)-1])
}

// A put that demands persistence from a sink that cannot give it fails,
// after the bytes were placed and flushed.
func TestPutPersistentOnVolatile(t *testing.T) {
	dir := "/dev/shm"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no /dev/shm")
	}
	d, err := os.MkdirTemp(dir, "sinkpeer-")
	require.NoError(t, err)
	defer os.RemoveAll(d)
	port, out, stop := serveT(t, SinkConfig{File: filepath.Join(d, "sink"), Size: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var perr bytes.Buffer
	err = Put(ctx, PutConfig{PeerConfig: peer(port), Src: strings.NewReader("x"), Persistent: true, Err: &perr})
	require.ErrorIs(t, err, pmemsink.ErrNotPersistent)
	require.Contains(t, perr.String(), "flush-extension, placed")
	require.NoError(t, stop())
	require.Contains(t, out.String(), "sink: volatile on tmpfs")
	require.Contains(t, out.String(), "usage 0x19")
}

// Toward a target that answers no Flush extension (a librpma server; here
// the sink met without iwarp-go's peer trailer, as librpma clients meet
// it) auto flushes by read-after-write, not GPSPM: a librpma server that
// posted no receive would end the connection on a GPSPM Send. GPSPM is
// used when named. --offset data writes at the descriptor's data_offset.
func TestPutTowardLibrpmaTarget(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sink")
	port, _, stop := serveT(t, SinkConfig{File: file, Size: 1 << 20, Mode: pmemsink.ModeMsync, DataOffset: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := peer(port)
	p.Options = []conn.Option{conn.WithoutPeerTrailer()}
	for _, c := range []struct {
		m    pmemsink.Method
		want string
		data string
	}{
		{pmemsink.MethodAuto, "read-after-write, persistent", "by read"},
		{pmemsink.MethodGPSPM, "gpspm, persistent", "by gpspm"},
	} {
		var perr bytes.Buffer
		require.NoError(t, Put(ctx, PutConfig{PeerConfig: p, AtDataOffset: true, Src: strings.NewReader(c.data), Method: c.m, Persistent: true, Err: &perr}))
		require.Contains(t, perr.String(), "at offset 64 of a 1 MiB region")
		require.Contains(t, perr.String(), c.want)
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, c.data, string(b[64:64+len(c.data)]))
	}
	require.NoError(t, stop())
}
