package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerftestCommand: a server and a client of iwarp-peer perftest over
// loopback, the client given its options after the address as getopt
// allows; both print the row.
func TestPerftestCommand(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sout, serr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runPerftest(ctx, []string{"send_lat", "-j", "127.0.0.1", "-p", port, "-s", "1K", "-n", "50"}, &sout, &serr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(sout.String(), "Waiting for client to connect") }, 10*time.Second, 10*time.Millisecond)
	var cout, cerr lockedBuffer
	require.NoError(t, runPerftest(ctx, []string{"send_lat", "127.0.0.1", "-Rp", port, "--size=1024", "-n", "50", "-F"}, &cout, &cerr), cerr.String())
	require.NoError(t, <-done, serr.String())
	for _, out := range []string{cout.String(), sout.String()} {
		assert.Contains(t, out, "t_typical[usec]")
		assert.Contains(t, out, "\n 1024    50   ")
	}
}

func TestPerftestCommandUsage(t *testing.T) {
	var out, errb lockedBuffer
	require.Equal(t, 2, run([]string{"perftest", "-h"}, &out, &errb))
	assert.Contains(t, errb.String(), "-R, --rdma_cm          accepted")
	for _, args := range [][]string{{"perftest"}, {"perftest", "ping_bw"}, {"perftest", "write_bw", "--crc", "on"},
		{"perftest", "write_bw", "-s", "0"}, {"perftest", "write_bw", "a", "b"}} {
		errb = lockedBuffer{}
		assert.Equal(t, 2, run(args, &out, &errb), "%v", args)
	}
	errb = lockedBuffer{}
	assert.Equal(t, 1, run([]string{"perftest", "write_lat", "-q", "2", "127.0.0.1"}, &out, &errb), "latency tests take one queue pair")
	assert.Contains(t, errb.String(), "invalid configuration")
}
