package main

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerftestCommand: a server and a client of iwarp-peer perftest over
// loopback, the client given its options after the address as getopt
// allows; both print the row. The server stops on its signal.
func TestPerftestCommand(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := start("perftest", "send_lat", "-j", "127.0.0.1", "-p", port, "-s", "1K", "-n", "50")
	srv.waitFor(t, `Waiting for client to connect`)
	code, out, errb := runCmd(context.Background(), "perftest", "send_lat", "127.0.0.1", "-Rp", port, "--size=1024", "-n", "50", "-F")
	require.Equal(t, 0, code, errb)
	require.Equal(t, 0, srv.exit(t), srv.stderr.String())
	for _, o := range []string{out, srv.stdout.String()} {
		assert.Contains(t, o, "t_typical[usec]")
		assert.Contains(t, o, "\n 1024    50   ")
	}
}

// atomic_lat with CMP_AND_SWAP between two iwarp-go processes (siw has
// no atomics): the size is 8 bytes whatever -s says.
func TestPerftestCommand_AtomicLat(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := start("perftest", "atomic_lat", "-j", "127.0.0.1", "-p", port, "-A", "CMP_AND_SWAP", "-n", "50")
	srv.waitFor(t, `Waiting for client to connect`)
	code, out, errb := runCmd(context.Background(), "perftest", "atomic_lat", "127.0.0.1", "-p", port, "--atomic_type=CMP_AND_SWAP", "-n", "50", "-s", "64")
	require.Equal(t, 0, code, errb)
	require.Equal(t, 0, srv.exit(t), srv.stderr.String())
	assert.Contains(t, out, "Atomic Latency Test")
	assert.Contains(t, out, "t_typical[usec]")
	assert.Contains(t, out, "\n 8       50   ")
	code, _, errb = runCmd(context.Background(), "perftest", "atomic_bw", "-A", "SWAP")
	assert.Equal(t, 2, code)
	assert.Contains(t, errb, "atomic type")
}

func TestPerftestCommandMistakes(t *testing.T) {
	ctx := context.Background()
	code, out, _ := runCmd(ctx, "perftest", "-h")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "-R, --rdma_cm          accepted")
	for _, args := range [][]string{{"perftest"}, {"perftest", "ping_bw"}, {"perftest", "write_bw", "--crc", "on"},
		{"perftest", "write_bw", "-s", "0"}, {"perftest", "write_bw", "a", "b"}, {"perftest", "-s", "64", "write_bw"}} {
		code, _, errb := runCmd(ctx, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.NotEmpty(t, errb, "%v", args)
	}
	code, _, errb := runCmd(ctx, "perftest", "write_lat", "-q", "2", "127.0.0.1")
	assert.Equal(t, 1, code, "latency tests take one queue pair")
	assert.Contains(t, errb, "invalid configuration")
}

// A perftest server has the servers' limits and --metrics: with
// --max-conns 1 and one client connected, a second connection is closed
// before any MPA exchange and the refusal is in the Prometheus series.
func TestPerftestCommand_LimitsAndMetrics(t *testing.T) {
	srv, maddr := server(t, "perftest", "write_bw", "-j", "127.0.0.1", "-p", "0", "--max-conns", "1")
	port := srv.waitFor(t, `listening on port (\d+)\n`)
	addr := net.JoinHostPort("127.0.0.1", port)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	held := holdAndRefuse(ctx, t, addr)
	capped := k("iwarp_listener_refused_total", "listener", addr, "reason", "max_connections")
	require.Eventually(t, func() bool { return scrape(t, maddr)[capped] == 1 },
		10*time.Second, 10*time.Millisecond, "the refusal is counted: %v", scrape(t, maddr)[capped])

	held.Close()
	srv.stop(context.Canceled)
	srv.exit(t) // the held client broke its run: the exit status may say so
}
