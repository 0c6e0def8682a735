package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/interrupt"
)

func TestBench_Flags(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{}, "give exactly one of -s, -c and --loopback"},
		{[]string{"-s", "-c", "-a", "x"}, "give exactly one of"},
		{[]string{"--loopback", "--op", "atomic"}, `--op "atomic"`},
		{[]string{"--loopback", "--size", "0"}, "size 0"},
		{[]string{"--loopback", "--size", "257MiB"}, `size "257MiB"`},
		{[]string{"--loopback", "--size", "lots"}, `size "lots"`},
		{[]string{"--loopback", "--iters", "10", "--duration", "1s"}, "not both"},
		{[]string{"--loopback", "--iters", "-1"}, "must not be negative"},
		{[]string{"--loopback", "--iters", "0"}, "--iters 0: want at least one message"},
		{[]string{"--loopback", "--lat-iters", "-2"}, "--lat-iters -2"},
		{[]string{"--loopback", "--window", "0"}, "--window 0"},
		{[]string{"--loopback", "--window", "1025"}, "--window 1025"},
		{[]string{"-c"}, "the client needs -a ADDR"},
		{[]string{"-c", "-a", "h", "--compare-tcp"}, "--compare-tcp needs --loopback"},
		{[]string{"-c", "-a", "h", "--once"}, "--once applies to the server"},
		{[]string{"-s", "-p", "65536"}, "-p 65536"},
		{[]string{"--loopback", "extra"}, `unexpected argument "extra"`},
		{[]string{"--loopback", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"-s", "--repeat", "2"}, "--repeat is the client's choice"},
		{[]string{"--loopback", "--qps", "0"}, "--qps 0: want 1 to 1024"},
		{[]string{"--loopback", "--qps", "1025"}, "--qps 1025"},
		{[]string{"-s", "--max-sessions", "0"}, "--max-sessions 0"},
		{[]string{"--loopback", "--max-sessions", "4"}, "--max-sessions applies to the server"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errb := runCmd(context.Background(), append([]string{"bench"}, c.args...)...)
			require.Equal(t, 2, code, errb)
			require.Contains(t, errb, c.msg)
			require.Empty(t, out)
		})
	}

	std := stdio{&strings.Builder{}, &strings.Builder{}}
	cfg, _, err := parseBench([]string{"-c", "-a", "10.1.1.1", "--op", "read", "--size", "1MiB", "--duration", "2s", "--crc"}, std)
	require.NoError(t, err)
	require.Equal(t, 1<<20, cfg.Size)
	require.Equal(t, 2*time.Second, cfg.Duration)
	require.True(t, cfg.LatTimed, "a timed run times its latency phase")
	require.Equal(t, "10.1.1.1:18515", cfg.Target)
	cfg, _, err = parseBench([]string{"--loopback", "--iters", "50000"}, std)
	require.NoError(t, err)
	require.Equal(t, 10000, cfg.LatIters, "latency round trips are capped by default")
	require.Equal(t, "write", cfg.Op)
	require.Equal(t, 65536, cfg.Size)
	cfg, _, err = parseBench([]string{"--loopback"}, std)
	require.NoError(t, err)
	require.Equal(t, 1000, cfg.Iters, "neither --iters nor --duration: 1000 messages")
	require.Equal(t, 64, cfg.Window)
	require.Equal(t, 1, cfg.QPs)
	_, b, err := parseBench([]string{"-s", "--max-sessions", "300"}, std)
	require.NoError(t, err)
	require.Equal(t, 300, b.maxSessions)
}

// --json keeps its keys and prints the summary object as the last line of
// stdout.
func TestBench_JSONLastLine(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "bench", "--json", "--loopback", "--compare-tcp", "--op", "send", "--size", "1k",
		"--iters", "100", "--lat-iters", "10")
	require.Equal(t, 0, code, errb)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &m))
	for _, k := range []string{"op", "size", "crc", "window", "messages", "bytes", "seconds", "gbps", "msg_rate", "lat_iters",
		"lat_p50_us", "lat_p99_us", "setup", "repeat", "tcp_messages", "tcp_bytes", "tcp_seconds", "tcp_gbps", "tcp_msg_rate",
		"tcp_lat_p50_us", "tcp_lat_p99_us", "ratio", "lat_ratio",
		"qps", "fpdus_received", "crc_checked_fpdus", "crc_errors", "lat_p99_ratio"} {
		require.Contains(t, m, k)
	}
	require.NotContains(t, m, "tcp_crc_ratio", "no CRC, no CRC baseline")

	// --qps and --crc: the CRC baseline's ratio beside the plain one, and
	// the setup says the CRC was checked on every FPDU.
	code, out, errb = runCmd(context.Background(), "bench", "--json", "--loopback", "--compare-tcp", "--crc", "--qps", "3",
		"--op", "write", "--size", "100k", "--iters", "20", "--lat-iters", "0")
	require.Equal(t, 0, code, errb)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	m = nil
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &m))
	require.Equal(t, 3.0, m["qps"])
	require.Equal(t, 60.0, m["messages"])
	for _, k := range []string{"ratio", "tcp_crc_ratio", "tcp_crc_gbps"} {
		require.Contains(t, m, k)
	}
	require.Contains(t, m["setup"], "CRC checked on every FPDU received")
	require.Equal(t, m["fpdus_received"], m["crc_checked_fpdus"])
}

// The text output of --repeat shows the run count, the spread of each
// figure and the two ratios, each named.
func TestBench_RepeatText(t *testing.T) {
	code, out, errb := runCmd(context.Background(), "bench", "--loopback", "--compare-tcp", "--repeat", "3", "--op", "write",
		"--size", "512", "--iters", "100", "--lat-iters", "10")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "iwarp-peer bench: write of 512 B, 64 in flight, CRC off; medians of 3 runs")
	require.Regexp(t, `(?m)^  iwarp-go +100 +[0-9.]+ Gb/s +\d+ +[0-9.]+ µs +[0-9.]+ µs$`, out)
	require.Regexp(t, `(?m)^    min–max +[0-9.]+–[0-9.]+ Gb/s +[0-9.]+–[0-9.]+ µs +$`, out)
	require.Equal(t, 2, strings.Count(out, "min–max"), "under iwarp-go and under raw TCP")
	require.Regexp(t, `(?m)^  iwarp-go / raw TCP: bandwidth [0-9.]+ \([0-9.]+–[0-9.]+\), latency p50 [0-9.]+ \([0-9.]+–[0-9.]+\), p99 [0-9.]+ \([0-9.]+–[0-9.]+\)$`, out)
	require.Regexp(t, `(?m)^  round trips over twice the median: iwarp-go [0-9.]+ %, raw TCP [0-9.]+ %(, ratio [0-9.]+( \([0-9.]+–[0-9.]+\))?)?$`, out)
	require.Regexp(t, `(?m)^  CPU per round trip: iwarp-go [0-9.]+ µs \(process: client and server\), raw TCP [0-9.]+ µs \(both ends\)$`, out)
	require.Regexp(t, `(?m)^  CPU per round trip, both endpoints: iwarp-go \d+ ns, raw TCP \d+ ns, ratio [0-9.]+ \([0-9.]+–[0-9.]+\)$`, out)
	require.Regexp(t, `(?m)^  CPU per MiB moved \(both ends\): iwarp-go \d+ µs, raw TCP \d+ µs, ratio [0-9.]+ \([0-9.]+–[0-9.]+\)$`, out)

	// With CRC and no latency phase: the CPU of the CRC baseline too, and
	// no latency spread under the bandwidth one.
	code, out, errb = runCmd(context.Background(), "bench", "--loopback", "--compare-tcp", "--crc", "--repeat", "2", "--op", "write",
		"--size", "65536", "--iters", "50", "--lat-iters", "0")
	require.Equal(t, 0, code, errb)
	require.Regexp(t, `(?m)^  CPU per MiB moved \(both ends\): iwarp-go \d+ µs, raw TCP \d+ µs, ratio [0-9.]+ \([0-9.]+–[0-9.]+\); raw TCP with CRC32c \d+ µs, ratio [0-9.]+ \([0-9.]+–[0-9.]+\)$`, out)
	require.NotContains(t, out, "0.0–0.0 µs")

	code, out, errb = runCmd(context.Background(), "bench", "--loopback", "--op", "read", "--size", "64", "--iters", "50", "--lat-iters", "0")
	require.Equal(t, 0, code, errb)
	require.NotContains(t, out, "min–max", "one run has no spread")
	require.NotContains(t, out, "medians")
	require.NotContains(t, out, "round trips over", "no latency phase")
}

// The two-process form: a server (-s --once) answers a client (-c) and
// exits after the client's run; without --once it serves until stopped,
// then says so in one line and exits 0.
func TestBench_ServerAndClient(t *testing.T) {
	for _, once := range []bool{true, false} {
		args := []string{"bench", "-s", "-a", "127.0.0.1", "-p", "0", "--max-sessions", "4"}
		if once {
			args = append(args, "--once")
		}
		srv := start(args...)
		var port string
		for deadline := time.Now().Add(10 * time.Second); port == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, a, ok := strings.Cut(srv.stderr.String(), "bench server listening on "); ok {
				_, port, _ = net.SplitHostPort(strings.TrimSpace(a))
			}
		}
		require.NotEmpty(t, port, srv.stderr.String())
		code, out, errb := runCmd(context.Background(), "bench", "-c", "-a", "127.0.0.1", "-p", port, "--op", "send", "--size", "100", "--iters", "500", "--qps", "3")
		require.Equal(t, 0, code, errb)
		require.Contains(t, out, "iwarp-peer bench: send of 100 B, 64 in flight on each of 3 queue pairs, CRC off")
		require.Regexp(t, `iwarp-go\s+1500\s+[0-9.]+ Gb/s`, out)
		require.Regexp(t, `(?m)^  CPU per round trip: iwarp-go [0-9.]+ µs \(client\), iwarp-go server [0-9.]+ µs \(its process\)$`, out)
		require.NotContains(t, out, "raw TCP")
		if !once {
			srv.stop(interrupt.Signal{Signal: syscall.SIGINT})
		}
		require.Equal(t, 0, srv.exit(t), srv.stderr.String())
		if once {
			require.NotContains(t, srv.stderr.String(), "stopped")
		} else {
			require.True(t, strings.HasSuffix(srv.stderr.String(), "iwarp-peer bench: server stopped (interrupt)\n"), srv.stderr.String())
		}
	}
}

func TestBench_CPUProfile(t *testing.T) {
	path := t.TempDir() + "/cpu.prof"
	code, _, errb := runCmd(context.Background(), "bench", "--loopback", "--size", "64", "--iters", "100", "--lat-iters", "10", "--cpuprofile", path)
	require.Equal(t, 0, code, errb)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEmpty(t, b)
}
