//go:build linux || darwin || freebsd

package main

import (
	"bufio"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/pmemsink"
	"github.com/stretchr/testify/require"
)

// sinkProc is an iwarp-peer sink process.
type sinkProc struct {
	cmd   *exec.Cmd
	port  int
	mu    sync.Mutex
	lines []string
	eof   chan struct{}
}

var portLine = regexp.MustCompile(`^listening on port (\d+)$`)

func startSink(t *testing.T, args ...string) *sinkProc {
	t.Helper()
	p := &sinkProc{eof: make(chan struct{})}
	p.cmd = exec.Command(peerBinary(t), append([]string{"sink", "-a", "127.0.0.1", "-p", "0"}, args...)...)
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	port := make(chan int, 1)
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if m := portLine.FindStringSubmatch(sc.Text()); m != nil {
				n, _ := strconv.Atoi(m[1])
				port <- n
			}
		}
	}()
	select {
	case p.port = <-port:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatal("the sink did not start")
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	return p
}

func (p *sinkProc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *sinkProc) wait() error {
	<-p.eof
	return p.cmd.Wait()
}

func (p *sinkProc) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// The target process is killed right after the initiator sees its flush
// complete, then restarted: the flushed range reads back intact, for each
// method and random sizes from 1 byte to 1 MiB. (A kill cannot show a
// missing persist: the bytes of a shared mapping outlive the process. It
// shows an acknowledgement sent before the bytes were placed.)
func TestSink_KillAfterFlush(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sink")
	const size = 4 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	methods := []pmemsink.Method{pmemsink.MethodExtension, pmemsink.MethodGPSPM, pmemsink.MethodReadAfterWrite}
	type write struct {
		off  uint64
		data []byte
	}
	var flushed []write
	for i := range rounds {
		p := startSink(t, "--file", file, "--size", "4m", "--mode", "msync")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		in, err := pmemsink.Dial(ctx, "tcp", p.addr(), pmemsink.WithGPSPM())
		require.NoError(t, err)
		// What earlier rounds flushed is there after their kill.
		for _, w := range flushed {
			back := make([]byte, len(w.data))
			require.NoError(t, in.Read(ctx, w.off, back))
			require.True(t, bytes.Equal(w.data, back), "round %d: %d bytes at %d flushed before a kill", i, len(w.data), w.off)
		}
		n := 1 + rng.IntN(1<<20)
		w := write{off: uint64(rng.IntN(size - n)), data: make([]byte, n)}
		for j := range w.data {
			w.data[j] = byte(rng.Uint32())
		}
		require.NoError(t, in.Write(ctx, w.off, w.data))
		m := methods[i%len(methods)]
		_, err = in.Flush(ctx, w.off, uint64(n), pmemsink.UseMethod(m))
		require.NoError(t, err, m)
		require.NoError(t, p.cmd.Process.Kill())
		p.wait()
		in.Close()
		cancel()
		// Later rounds overwrite: keep the newest bytes of each range.
		var kept []write
		for _, x := range flushed {
			if x.off+uint64(len(x.data)) <= w.off || w.off+uint64(n) <= x.off {
				kept = append(kept, x)
			}
		}
		flushed = append(kept, w)
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, w := range flushed {
		require.True(t, bytes.Equal(w.data, b[w.off:w.off+uint64(len(w.data))]), "the file holds %d bytes at %d", len(w.data), w.off)
	}
}

// SIGINT and SIGTERM: the sink finishes, persists, prints one line and
// exits 0.
func TestSink_Signal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sink")
			p := startSink(t, "--file", file, "--size", "1m")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			in, err := pmemsink.Dial(ctx, "tcp", p.addr())
			require.NoError(t, err)
			defer in.Close()
			require.NoError(t, in.Write(ctx, 10, []byte("hello")))
			_, err = in.Flush(ctx, 10, 5)
			require.NoError(t, err)
			require.NoError(t, p.cmd.Process.Signal(sig))
			require.NoError(t, p.wait(), "exit status 0")
			out := p.output()
			require.Contains(t, out[0], "sink: msync on file "+file)
			last := out[len(out)-1]
			require.True(t, strings.HasPrefix(last, "sink: stopped ("), last)
			require.Contains(t, last, "1 connections, 5 B written, 1 persists; region persisted")
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, "hello", string(b[10:15]))
		})
	}
}

// A mode the file cannot have fails at start with the reason.
func TestSink_ModeRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MAP_SYNC is Linux's")
	}
	code, _, errb := runCmd(context.Background(), "sink", "-p", "0", "--file", filepath.Join(t.TempDir(), "f"), "--size", "1m", "--mode", "dax")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "mode dax: mmap with MAP_SYNC failed")
	code, _, errb = runCmd(context.Background(), "sink", "--size", "1m")
	require.Equal(t, 2, code)
	require.Contains(t, errb, "--file is required")
}

// put and get from the command line against a sink process: get writes
// exactly the bytes put, and nothing else, on stdout.
func TestSink_PutGetCommands(t *testing.T) {
	dir := t.TempDir()
	p := startSink(t, "--file", filepath.Join(dir, "sink"), "--size", "1m", "--data-offset", "64")
	data := make([]byte, 100000)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, data, 0o600))
	port := strconv.Itoa(p.port)
	ctx := context.Background()
	for _, m := range []string{"auto", "gpspm", "read"} {
		code, out, errb := runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, "--offset", "4099", "--method", m, src)
		require.Equal(t, 0, code, errb)
		require.Empty(t, out)
		require.Regexp(t, `^put: 97\.7 KiB at offset 4099 of a 1 MiB region \(STag 0x[0-9a-f]{8}\): (flush-extension|gpspm|read-after-write), persistent; durable .* after the first write`, errb)
	}
	code, out, errb := runCmd(ctx, "get", "-a", "127.0.0.1", "-p", port, "--offset", "4099", "--length", "100000")
	require.Equal(t, 0, code, errb)
	require.True(t, bytes.Equal(data, []byte(out)), "exactly the bytes on stdout")
	require.Contains(t, errb, "get: 97.7 KiB at offset 4099")

	code, _, errb = runCmd(ctx, "get", "-a", "127.0.0.1", "-p", port, "--offset", "1048570", "--length", "7")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "outside the target's 1048576-byte region")
	// --offset data: the descriptor's data_offset (the sink's 64).
	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, "--offset", "data", src)
	require.Equal(t, 0, code, errb)
	require.Contains(t, errb, "put: 97.7 KiB at offset 64 of a 1 MiB region")
	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, "--offset", "start", src)
	require.Equal(t, 2, code, errb)
	require.Contains(t, errb, `--offset: want a number or data, not "start"`)
	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, filepath.Join(dir, "no-such-file"))
	require.Equal(t, 1, code)
	require.Contains(t, errb, "no-such-file")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
	out2 := strings.Join(p.output(), "\n")
	require.Contains(t, out2, "usage 0x39")
	require.Regexp(t, `conn \d closed: 97\.7 KiB written in \d+ placements, 1 persists`, out2)
}

// sink --metrics: the persists of three flushes (one per method) are in
// the Prometheus series and in stat's table.
func TestSink_Metrics(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sink")
	srv, maddr := server(t, "sink", "-a", "127.0.0.1", "-p", "0", "--file", file, "--size", "1m")
	port := srv.waitFor(t, `listening on port (\d+)\n`)
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, bytes.Repeat([]byte{7}, 100000), 0o600))
	before := scrape(t, maddr)
	require.Zero(t, before[k("iwarp_pmem_persists_total", "sink", file)])
	for _, m := range []string{"extension", "gpspm", "read"} {
		code, _, errb := runCmd(t.Context(), "put", "-a", "127.0.0.1", "-p", port, "--method", m, src)
		require.Equal(t, 0, code, errb)
	}
	s := scrape(t, maddr)
	require.Equal(t, float64(3), s[k("iwarp_pmem_persists_total", "sink", file)], "one persist per flush")
	require.GreaterOrEqual(t, s[k("iwarp_pmem_persisted_bytes_total", "sink", file)], float64(3*100000))
	require.Zero(t, s[k("iwarp_pmem_persist_errors_total", "sink", file)])
	var info []string
	for key := range s {
		if strings.HasPrefix(key, "iwarp_pmem_sink_info{") {
			info = append(info, key)
		}
	}
	require.Len(t, info, 1, "one sink")
	code, out, errb := runCmd(t.Context(), "stat", "--once", maddr)
	require.Equal(t, 0, code, errb)
	require.Regexp(t, `(?m)^sink `+regexp.QuoteMeta(file)+`: \w+ \((not )?durable\); 3 persists of [0-9.]+ KiB, mean \S+; 0 persist errors$`, out)
	srv.stopped(t)
}
