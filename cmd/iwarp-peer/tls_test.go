//go:build linux || darwin || freebsd

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// sink and put/get inside TLS, with mutual authentication: the bytes put
// come back through get; a put without a client certificate, and one
// without TLS at all, are refused with errors that name TLS.
func TestSink_PutGetOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cmd CA")
	caFile, srvCert, srvKey := ca.Files(t, dir, "sink")
	_, cliCert, cliKey := ca.Files(t, dir, "client")
	p := startSink(t, "--file", filepath.Join(dir, "sink"), "--size", "1m",
		"--tls-cert", srvCert, "--tls-key", srvKey, "--tls-ca", caFile)
	data := bytes.Repeat([]byte("inside TLS "), 3000)
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, data, 0o600))
	port := strconv.Itoa(p.port)
	ctx := context.Background()
	tlsArgs := []string{"--tls-ca", caFile, "--tls-cert", cliCert, "--tls-key", cliKey}

	code, _, errb := runCmd(ctx, append(append([]string{"put", "-a", "127.0.0.1", "-p", port, "--offset", "512"}, tlsArgs...), src)...)
	require.Equal(t, 0, code, errb)
	require.Contains(t, errb, "persistent")
	code, out, errb := runCmd(ctx, append([]string{"get", "-a", "127.0.0.1", "-p", port, "--offset", "512", "--length", strconv.Itoa(len(data))}, tlsArgs...)...)
	require.Equal(t, 0, code, errb)
	require.True(t, bytes.Equal(data, []byte(out)), "the bytes put come back")

	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, "--tls-ca", caFile, src)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "tls: certificate required")
	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, src)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "requires TLS")
	code, _, errb = runCmd(ctx, "put", "-a", "127.0.0.1", "-p", port, "--tls-cert", cliCert, src)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "--tls-cert and --tls-key go together")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait())
}

// bench inside TLS: the loopback run's baseline rows are raw crypto/tls
// streams, and the table says so; perftest's server and client meet
// inside TLS too.
func TestBenchAndPerftest_OverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cmd CA")
	caFile, cert, key := ca.Files(t, dir, "peer")
	tlsArgs := []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile}
	ctx := context.Background()

	code, out, errb := runCmd(ctx, append([]string{"bench", "--loopback", "--compare-tcp", "--op", "write", "--size", "64k", "--iters", "200", "--lat-iters", "50"}, tlsArgs...)...)
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "CRC off, inside TLS")
	require.Regexp(t, `raw TLS\s+200\s+[0-9.]+ Gb/s`, out)
	require.Contains(t, out, "iwarp-go / raw TLS:")
	require.NotContains(t, out, "raw TCP")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := start(append([]string{"perftest", "send_lat", "-j", "127.0.0.1", "-p", port, "-s", "64", "-n", "50"}, tlsArgs...)...)
	srv.waitFor(t, `Waiting for client to connect`)
	code, out, errb = runCmd(ctx, append([]string{"perftest", "send_lat", "127.0.0.1", "-Rp", port, "-s", "64", "-n", "50", "-F"}, tlsArgs...)...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, 0, srv.exit(t), srv.stderr.String())
	require.Contains(t, out, "t_typical[usec]")
}
