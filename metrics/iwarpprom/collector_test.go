package iwarpprom_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/promtest"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/metrics/iwarpprom"
	"github.com/iwarp-go/iwarp-go/pmemsink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var k = promtest.Key

// gather registers a collector of src in a pedantic registry (which checks
// every series against its description) and reads it.
func gather(t *testing.T, src *metrics.Source, opts ...iwarpprom.Option) promtest.Series {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(iwarpprom.NewCollector(src, opts...)))
	s, err := promtest.Gather(reg)
	require.NoError(t, err)
	return s
}

// newPair runs conntest.Pair.WriteSendRead on a new pair of a new device.
func newPair(t *testing.T) (*conn.Device, *conntest.Pair) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 1)
	p.WriteSendRead(t)
	return dev, p
}

// The device's series count exactly what a known exchange put on the
// wire, both ends being the device's; opcodes that did not occur read 0.
func TestCollector_DeviceSeries(t *testing.T) {
	dev, p := newPair(t)
	src := metrics.NewSource(dev, p.Listener)
	s := gather(t, src)
	ln := p.Listener.Addr().String()
	fpdus := map[string]float64{"write": 2, "send": 1, "read_request": 1, "read_response": 1,
		"send_invalidate": 0, "send_se": 0, "send_se_invalidate": 0, "terminate": 0}
	bytes := map[string]float64{"write": 14 + 14 + 100, "send": 18 + 10, "read_request": 18 + 28, "read_response": 14 + 64,
		"send_invalidate": 0, "send_se": 0, "send_se_invalidate": 0, "terminate": 0}
	want := promtest.Series{
		k("iwarp_crc_errors_total"):                        0,
		k("iwarp_reads_queued_total"):                      1,
		k("iwarp_reads_issued_total"):                      1,
		k("iwarp_reads_held_total"):                        0,
		k("iwarp_connections_total"):                       2,
		k("iwarp_connections_closed_total"):                0,
		k("iwarp_connections_open"):                        2,
		k("iwarp_rejects_received_total"):                  0,
		k("iwarp_listener_accepted_total", "listener", ln): 1,
	}
	for op, n := range fpdus {
		want[k("iwarp_fpdus_sent_total", "opcode", op)] = n
		want[k("iwarp_fpdus_received_total", "opcode", op)] = n
		want[k("iwarp_bytes_sent_total", "opcode", op)] = bytes[op]
		want[k("iwarp_bytes_received_total", "opcode", op)] = bytes[op]
	}
	for _, r := range metrics.RefusalReasons {
		want[k("iwarp_listener_refused_total", "listener", ln, "reason", r.Label)] = 0
	}
	setup := s[k("iwarp_setup_seconds_total")]
	require.Positive(t, setup)
	delete(s, k("iwarp_setup_seconds_total"))
	require.Equal(t, want, s, "exactly these series, no per-queue-pair ones")

	p.Closed(t)
	// Close returns once the queue pair is closed; its count of closes
	// follows a moment later.
	require.Eventually(t, func() bool { return gather(t, src)[k("iwarp_connections_closed_total")] == 2 }, 10*time.Second, time.Millisecond)
	s = gather(t, src)
	require.Zero(t, s[k("iwarp_connections_open")])
	require.Equal(t, fpdus["write"], s[k("iwarp_fpdus_sent_total", "opcode", "write")], "closed queue pairs stay counted")
	require.Equal(t, setup, s[k("iwarp_setup_seconds_total")])
}

// Per-queue-pair series come on request, labelled by QPN and remote
// address, and end with the queue pair.
func TestCollector_PerQueuePair(t *testing.T) {
	dev, p := newPair(t)
	src := metrics.NewSource(dev)
	s := gather(t, src, iwarpprom.PerQueuePair())
	cl := []string{"qpn", strconv.Itoa(int(p.Client.QPN())), "remote", p.Client.RemoteAddr().String()}
	sv := []string{"qpn", strconv.Itoa(int(p.Server.QPN())), "remote", p.Server.RemoteAddr().String()}
	with := func(labels []string, more ...string) []string { return append(append([]string{}, labels...), more...) }
	require.Equal(t, float64(2), s[k("iwarp_qp_fpdus_sent_total", with(cl, "opcode", "write")...)])
	require.Equal(t, float64(14+14+100), s[k("iwarp_qp_bytes_received_total", with(sv, "opcode", "write")...)])
	require.Equal(t, float64(1), s[k("iwarp_qp_fpdus_sent_total", with(sv, "opcode", "read_response")...)])
	require.Equal(t, float64(1), s[k("iwarp_qp_reads_issued_total", cl...)])
	require.Equal(t, float64(1), s[k("iwarp_qp_reads_queued_total", sv...)])
	require.Contains(t, s, k("iwarp_qp_fpdus_received_total", with(cl, "opcode", "send_se")...), "defined opcodes always")
	require.Positive(t, s[k("iwarp_qp_setup_seconds", cl...)])
	var qpNames []string
	for _, name := range s.Names() {
		if strings.HasPrefix(name, "iwarp_qp_") {
			qpNames = append(qpNames, name)
		}
	}
	// The names the package documentation lists; Terminates once they
	// occur.
	require.Equal(t, []string{"iwarp_qp_bytes_received_total", "iwarp_qp_bytes_sent_total", "iwarp_qp_crc_errors_total",
		"iwarp_qp_fpdus_received_total", "iwarp_qp_fpdus_sent_total", "iwarp_qp_reads_held_total",
		"iwarp_qp_reads_issued_total", "iwarp_qp_reads_queued_total", "iwarp_qp_setup_seconds"}, qpNames)

	p.Closed(t)
	for _, name := range gather(t, src, iwarpprom.PerQueuePair()).Names() {
		require.NotRegexp(t, "^iwarp_qp_", name, "a closed queue pair's series end")
	}
}

// Terminates are labelled by code and name, on both ends.
func TestCollector_Terminates(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 0)
	bad := p.ServerMR.Remote(0)
	bad.STag ^= 0xffffff00 // no such region: RFC 5041 §7.2, Invalid STag
	require.NoError(t, p.Client.PostSend(conn.SendWR{Op: conn.OpWrite, SGL: []conn.SGE{p.ClientMR.SGE(0, 8)}, Remote: bad}))
	p.Ended(t)
	s := gather(t, metrics.NewSource(dev))
	code := []string{"code", "0x1100", "name", "DDP Tagged Buffer Error: Invalid Steering Tag"}
	require.Equal(t, float64(1), s[k("iwarp_terminates_sent_total", code...)])
	require.Equal(t, float64(1), s[k("iwarp_terminates_received_total", code...)])
	require.Equal(t, float64(1), s[k("iwarp_fpdus_sent_total", "opcode", "terminate")])
}

// What a listener turns away is counted by reason.
func TestCollector_ListenerRefusals(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	ln, err := conn.Listen(t.Context(), "tcp", "127.0.0.1:0", conn.WithSetupTimeout(2*time.Second))
	require.NoError(t, err)
	defer ln.Close()
	src := metrics.NewSource(dev, ln)
	conntest.Garbage(t, ln.Addr().String())
	addr := ln.Addr().String()
	bad := k("iwarp_listener_refused_total", "listener", addr, "reason", "bad_request")
	require.Eventually(t, func() bool { return gather(t, src)[bad] == 1 }, 10*time.Second, 5*time.Millisecond)
	s := gather(t, src)
	require.Equal(t, float64(1), s[k("iwarp_listener_accepted_total", "listener", addr)])
	for _, r := range metrics.RefusalReasons {
		if r.Label != "bad_request" {
			require.Zero(t, s[k("iwarp_listener_refused_total", "listener", addr, "reason", r.Label)], r.Label)
		}
	}
}

// Two devices share a registry when their collectors carry labels that
// tell them apart.
func TestCollector_ConstLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, name := range []string{"a", "b"} {
		dev, err := conn.NewDevice()
		require.NoError(t, err)
		require.NoError(t, reg.Register(iwarpprom.NewCollector(metrics.NewSource(dev), iwarpprom.ConstLabels(prometheus.Labels{"device": name}))))
	}
	s, err := promtest.Gather(reg)
	require.NoError(t, err)
	require.Contains(t, s, k("iwarp_connections_total", "device", "a"))
	require.Contains(t, s, k("iwarp_connections_total", "device", "b"))
}

// The names follow Prometheus's conventions (promlint: units, _total on
// counters, help texts).
func TestCollector_Lint(t *testing.T) {
	dev, p := newPair(t)
	src := metrics.NewSource(dev, p.Listener)
	problems, err := testutil.CollectAndLint(iwarpprom.NewCollector(src, iwarpprom.PerQueuePair()))
	require.NoError(t, err)
	require.Empty(t, problems)
}

// A sink's series count its persists; its mode is in the info series.
func TestCollector_Sink(t *testing.T) {
	sk, err := pmemsink.Open(filepath.Join(t.TempDir(), "region"), 1<<16, pmemsink.WithMode(pmemsink.ModeVolatile))
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer sk.Close()
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	src := metrics.NewSource(dev)
	src.AddSink("region", sk)
	src.AddSink("again", sk) // the same sink: nothing new
	require.NoError(t, sk.Persist(0, 100))
	require.NoError(t, sk.PersistRanges([]pmemsink.Range{{Off: 4096, Len: 8}, {Off: 9000, Len: 1}}))
	s := gather(t, src)
	require.Equal(t, float64(1), s[k("iwarp_pmem_sink_info", "sink", "region", "mode", "volatile", "durable", "false")])
	require.Equal(t, float64(2), s[k("iwarp_pmem_persists_total", "sink", "region")])
	require.Equal(t, float64(109), s[k("iwarp_pmem_persisted_bytes_total", "sink", "region")])
	require.Zero(t, s[k("iwarp_pmem_persist_errors_total", "sink", "region")])
	require.Contains(t, s, k("iwarp_pmem_persist_seconds_total", "sink", "region"))
	require.NotContains(t, s, k("iwarp_pmem_persists_total", "sink", "again"))
	problems, err := testutil.CollectAndLint(iwarpprom.NewCollector(src))
	require.NoError(t, err)
	require.Empty(t, problems)
}
