package main

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/promtest"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

var k = promtest.Key

// waitIn waits until buf matches re and returns the first submatch.
func waitIn(t *testing.T, buf *conntest.LockedBuffer, re string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	var m []string
	require.Eventually(t, func() bool { m = r.FindStringSubmatch(buf.String()); return m != nil }, 20*time.Second, 5*time.Millisecond,
		"no %q in %q", re, buf.String())
	return m[len(m)-1]
}

// server runs a server command line with --metrics 127.0.0.1:0 and returns
// it and the address of its metrics endpoint.
func server(t *testing.T, args ...string) (*background, string) {
	t.Helper()
	b := start(append(args, "--metrics", "127.0.0.1:0")...)
	addr := waitIn(t, &b.stderr, `metrics at http://([^/\s]+)/metrics\n`)
	return b, addr
}

func (b *background) stopped(t *testing.T) {
	t.Helper()
	b.stop(nil)
	require.Equal(t, 0, b.exit(t), b.stderr.String())
}

func scrape(t *testing.T, addr string) promtest.Series {
	t.Helper()
	s, err := promtest.Scrape("http://" + addr + "/metrics")
	require.NoError(t, err)
	return s
}

// traffic is what a server's device should count over a client's run:
// its connections through the listener at ln, the FPDUs and ULPDU bytes
// it sent and received by opcode, and its Read Requests issued (ORD) and
// taken (IRD).
type traffic struct {
	ln                                   string
	connections                          float64
	sent, sentBytes, received, recvBytes map[string]float64
	readsIssued, readsQueued             float64
}

// series returns the deltas of every iwarp_ series the run should show;
// iwarp_setup_seconds_total, whose value is a time, is left out.
func (w traffic) series() promtest.Series {
	s := promtest.Series{
		k("iwarp_connections_total"):                         w.connections,
		k("iwarp_connections_closed_total"):                  w.connections,
		k("iwarp_connections_open"):                          0,
		k("iwarp_crc_errors_total"):                          0,
		k("iwarp_reads_issued_total"):                        w.readsIssued,
		k("iwarp_reads_queued_total"):                        w.readsQueued,
		k("iwarp_reads_held_total"):                          0,
		k("iwarp_rejects_received_total"):                    0,
		k("iwarp_listener_accepted_total", "listener", w.ln): w.connections,
	}
	for _, r := range metrics.RefusalReasons {
		s[k("iwarp_listener_refused_total", "listener", w.ln, "reason", r.Label)] = 0
	}
	for i := range metrics.DefinedOpcodes {
		op := metrics.OpcodeLabel(rdmap.Opcode(i))
		s[k("iwarp_fpdus_sent_total", "opcode", op)] = w.sent[op]
		s[k("iwarp_bytes_sent_total", "opcode", op)] = w.sentBytes[op]
		s[k("iwarp_fpdus_received_total", "opcode", op)] = w.received[op]
		s[k("iwarp_bytes_received_total", "opcode", op)] = w.recvBytes[op]
	}
	return s
}

// countsRun scrapes the server's endpoint at maddr, runs the client
// command line in a process of its own (so that this process's device
// holds the server's queue pairs only), waits until the server has closed
// its queue pairs, and checks that the deltas are want's.
func countsRun(t *testing.T, maddr string, want traffic, client ...string) (stdout string) {
	t.Helper()
	before := scrape(t, maddr)
	require.Contains(t, before, k("iwarp_listener_accepted_total", "listener", want.ln), "the listener is reported")
	code, out, errb := otherProcess(t, client...)
	require.Equal(t, 0, code, errb)
	closed := k("iwarp_connections_closed_total")
	require.Eventually(t, func() bool { return scrape(t, maddr)[closed]-before[closed] == want.connections }, 20*time.Second, 5*time.Millisecond)
	d := promtest.Delta(before, scrape(t, maddr), "iwarp_")
	setup := k("iwarp_setup_seconds_total")
	require.Positive(t, d[setup])
	delete(d, setup)
	for key, v := range d {
		// Opcodes beyond RFC 5040's are reported once they occur: other
		// tests of this process (the Flush extension's) may have made them
		// appear, which this run did not add to.
		if v == 0 && !rfc5040Label(key) {
			delete(d, key)
		}
	}
	require.Equal(t, want.series(), d)
	return out
}

// ULPDU sizes (RFC 5041 §5: tagged header 14 bytes, untagged 18; RFC 5040
// §4.4: a Read Request body of 28).
const tagged, untagged, readRequest = 14, 18, 18 + 28

// rping -s --metrics: 5 pings of 64 bytes. rping's server per ping
// (internal/rping, testServer): takes the client's source advertisement (a
// Send of 16 bytes), RDMA Reads the ping, sends "go ahead" (16 bytes),
// takes the sink advertisement, RDMA Writes the ping back (strlen + 1 = 64
// bytes) and sends "go ahead" again. Neither side offers peer-to-peer
// mode: no RTR.
func TestMetrics_RpingCountsWhatTheClientDid(t *testing.T) {
	srv, maddr := server(t, "rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0")
	defer srv.stopped(t)
	port := srv.waitFor(t, `^listening on port (\d+)\n`)
	const n = 5
	out := countsRun(t, maddr, traffic{
		ln: "127.0.0.1:" + port, connections: 1,
		sent:        map[string]float64{"send": 2 * n, "read_request": n, "write": n},
		sentBytes:   map[string]float64{"send": 2 * n * (untagged + 16), "read_request": n * readRequest, "write": n * (tagged + 64)},
		received:    map[string]float64{"send": 2 * n, "read_response": n},
		recvBytes:   map[string]float64{"send": 2 * n * (untagged + 16), "read_response": n * (tagged + 64)},
		readsIssued: n,
	}, "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "5", "-S", "64", "-V", "-v")
	require.Equal(t, n, strings.Count(out, "ping data: rdma-ping-"))
}

// bench -s --metrics: a Write run of 10 messages of 64 bytes and 3 round
// trips. Each phase has a connection of its own, opened with a Write RTR
// (bench's peer-to-peer mode). The bandwidth phase is the Writes and a
// 1-byte Read behind them (internal/bench, streamRDMA); a round trip of
// the latency phase is a Write and a zero-length Send each way.
func TestMetrics_BenchCountsWhatTheClientDid(t *testing.T) {
	srv, maddr := server(t, "bench", "-s", "-a", "127.0.0.1", "-p", "0")
	defer srv.stopped(t)
	port := waitIn(t, &srv.stderr, `listening on 127\.0\.0\.1:(\d+)\n`)
	// After each session's measured part the client asks for the
	// server's counts with a zero-length Send with Solicited Event, and the
	// server answers with a Send of the 40 bytes of its report.
	const iters, rtts, rtrs, sessions = 10, 3, 2, 2
	countsRun(t, maddr, traffic{
		ln: "127.0.0.1:" + port, connections: 2,
		sent:        map[string]float64{"write": rtts, "send": rtts + sessions, "read_response": 1},
		sentBytes:   map[string]float64{"write": rtts * (tagged + 64), "send": rtts*untagged + sessions*(untagged+40), "read_response": tagged + 1},
		received:    map[string]float64{"write": iters + rtts + rtrs, "send": rtts, "send_se": sessions, "read_request": 1},
		recvBytes:   map[string]float64{"write": (iters+rtts)*(tagged+64) + rtrs*tagged, "send": rtts * untagged, "send_se": sessions * untagged, "read_request": readRequest},
		readsQueued: 1,
	}, "bench", "-c", "-a", "127.0.0.1", "-p", port, "--op", "write", "--size", "64", "--iters", "10", "--window", "4", "--lat-iters", "3")
}

// iwtest -s --metrics serves its endpoint and reports its listener while
// it waits for its one connection (it exits after it: the counting is
// rping's and bench's tests').
func TestMetrics_Iwtest(t *testing.T) {
	srv, maddr := server(t, "iwtest", "-s", "-a", "127.0.0.1", "-p", "0")
	port := srv.waitFor(t, `LISTENING port=(\d+)\n`)
	s := scrape(t, maddr)
	require.Contains(t, s, k("iwarp_listener_accepted_total", "listener", "127.0.0.1:"+port))
	require.Contains(t, s, k("iwarp_fpdus_sent_total", "opcode", "write"))
	code, _, errb := otherProcess(t, "iwtest", "-c", "-a", "127.0.0.1", "-p", port, "-T", "write", "-S", "64", "-D", "c2s")
	require.Equal(t, 0, code, errb)
	require.Equal(t, 0, srv.exit(t), srv.stderr.String())
}

// stat --once prints the server's live queue pairs. The peer here is a
// queue pair of a device of its own that connects to rping -s and sends
// only its Write RTR (14 bytes): the server's queue pair has received
// exactly that and sent nothing. --metrics-qps adds its series to
// /metrics.
func TestStat_Once(t *testing.T) {
	srv, maddr := server(t, "rping", "-s", "-P", "-a", "127.0.0.1", "-p", "0", "--metrics-qps")
	defer srv.stopped(t)
	port := srv.waitFor(t, `^listening on port (\d+)\n`)
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	qp, err := dev.NewPD().NewQP(conn.NewCQ(4), conn.QPCaps{})
	require.NoError(t, err)
	defer qp.Close()
	require.NoError(t, qp.Connect(t.Context(), "tcp", "127.0.0.1:"+port, conn.WithP2P(conn.RTRWrite)))
	peer := qp.LocalAddr().String()
	fpdusIn := `iwarp_qp_fpdus_received_total\{opcode="write",qpn="(\d+)",remote="` + regexp.QuoteMeta(peer) + `"\}`
	var qpn string
	require.Eventually(t, func() bool {
		for key, v := range scrape(t, maddr) {
			if m := regexp.MustCompile(fpdusIn).FindStringSubmatch(key); m != nil && v == 1 {
				qpn = m[1]
				return true
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "the server's queue pair in /metrics")

	code, out, errb := runCmd(t.Context(), "stat", "--once", maddr)
	require.Equal(t, 0, code, errb)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 4, out)
	// The device's totals hold this process's earlier tests too
	// (metricshttp's tests check the line); one queue pair is open.
	require.Regexp(t, `^device: \d+ connections, 1 open; sent \d+ FPDUs, .+; received \d+ FPDUs, .+; \d+ CRC errors; Terminates \d+ sent, \d+ received$`, lines[0])
	require.Equal(t, "listener 127.0.0.1:"+port+": 1 accepted, 0 refused", lines[1])
	require.Equal(t, []string{"QPN", "REMOTE", "FPDUS", "OUT", "FPDUS", "IN", "BYTES", "OUT", "BYTES", "IN", "RATE", "OUT", "RATE", "IN",
		"READS", "IN", "READS", "OUT", "IRD", "ORD", "TERM", "OUT", "TERM", "IN", "CRC", "ERR"}, strings.Fields(lines[2]))
	// rping's IRD and ORD are 1; one refresh only: no rates.
	require.Equal(t, []string{qpn, peer, "0", "1", "0", "B", "14", "B", "-", "-", "0", "0", "1", "1", "0", "0", "0"}, strings.Fields(lines[3]))

	// The same from a URL, and as a live table: two refreshes, rates in
	// the second.
	ctx, cancel := context.WithCancel(t.Context())
	var live conntest.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"stat", "--interval", "50ms", "http://" + maddr + "/metrics"}, stdio{&live, &live})
	}()
	require.Eventually(t, func() bool { return strings.Count(live.String(), "device: ") >= 2 }, 20*time.Second, 5*time.Millisecond)
	cancel()
	require.Equal(t, 0, <-done, live.String())
	require.Contains(t, live.String(), " 0.0 Mb/s ")
}

func TestStat_Mistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"stat"}, "give the ADDR of one --metrics endpoint"},
		{[]string{"stat", "a", "b"}, "give the ADDR of one --metrics endpoint"},
		{[]string{"stat", "--interval", "0s", "a"}, "--interval 0s"},
		{[]string{"rping", "-s", "--metrics-qps"}, "--metrics-qps needs --metrics ADDR"},
	} {
		code, out, errb := runCmd(t.Context(), c.args...)
		require.Equal(t, 2, code, errb)
		require.Contains(t, errb, c.msg)
		require.Empty(t, out)
	}
	// Nothing listening there (a closed local port): exit 1, and why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	code, _, errb := runCmd(t.Context(), "stat", "--once", addr)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "iwarp-peer stat: ")
	require.Contains(t, errb, "connection refused")
	// A --metrics address that cannot be had.
	code, _, errb = runCmd(t.Context(), "rping", "-s", "-p", "0", "--metrics", "127.0.0.1:-1")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "--metrics: ")
}

// The usage of every command that takes --metrics shows it.
func TestMetrics_InUsage(t *testing.T) {
	for _, name := range []string{"rping", "bench", "iwtest"} {
		code, out, _ := runCmd(t.Context(), name, "-h")
		require.Equal(t, 0, code)
		require.Contains(t, out, "--metrics", name)
		require.Contains(t, out, "metrics-qps", name)
	}
}

// rfc5040Label reports whether a series key's opcode label, if any, is one
// of RFC 5040's (metrics.DefinedOpcodes, always reported).
func rfc5040Label(key string) bool {
	i := strings.Index(key, `opcode="`)
	if i < 0 {
		return true
	}
	for op := 0; op < metrics.DefinedOpcodes; op++ {
		if strings.HasPrefix(key[i+len(`opcode="`):], metrics.OpcodeLabel(rdmap.Opcode(op))+`"`) {
			return true
		}
	}
	return false
}
