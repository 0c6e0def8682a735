package metricshttp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/promtest"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The endpoint serves the device's series at /metrics (per queue pair on
// request) and the report with its queue pairs at ReportPath, which Fetch
// reads by address or URL.
func TestServe_MetricsAndReport(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 1)
	p.WriteSendRead(t)
	for _, perQP := range []bool{false, true} {
		srv, err := Serve("127.0.0.1:0", metrics.NewSource(dev), perQP)
		require.NoError(t, err)
		srv.AddListener(p.Listener)
		addr := srv.Addr().String()
		s, err := promtest.Scrape("http://" + addr + "/metrics")
		require.NoError(t, err)
		require.Equal(t, float64(2), s[promtest.Key("iwarp_fpdus_sent_total", "opcode", "write")])
		require.Equal(t, float64(1), s[promtest.Key("iwarp_listener_accepted_total", "listener", p.Listener.Addr().String())])
		require.Contains(t, s.Names(), "go_goroutines", "the Go runtime's series besides")
		qpSeries := false
		for _, n := range s.Names() {
			qpSeries = qpSeries || strings.HasPrefix(n, "iwarp_qp_")
		}
		require.Equal(t, perQP, qpSeries)

		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		for _, a := range []string{addr, "http://" + addr, "http://" + addr + "/metrics"} {
			r, err := Fetch(context.Background(), client, a)
			require.NoError(t, err, a)
			require.Len(t, r.QueuePairs, 2, "queue pairs always in the report")
			require.Equal(t, uint64(2), r.Device.Connections)
			require.Len(t, r.Listeners, 1)
		}
		srv.Close()
	}
	p.Closed(t)

	var nilServer *Server
	nilServer.AddListener(p.Listener) // a command without --metrics
	nilServer.Close()
	require.Nil(t, nilServer.Addr())
}

func TestFetch_NotAnEndpoint(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	defer hs.Close()
	_, err := Fetch(context.Background(), hs.Client(), hs.URL)
	require.ErrorContains(t, err, "404 Not Found (is it an iwarp-peer server with --metrics?)")
	hs.Client().CloseIdleConnections()
}

// The table: the device's totals, each listener's refusals by reason, a
// row per queue pair, with rates against the previous report.
func TestTable(t *testing.T) {
	qp := func(qpn uint32, out, in uint64) metrics.QueuePair {
		return metrics.QueuePair{QPN: qpn, Remote: "10.0.0.2:40000", IRD: 16, ORD: 8, Counters: metrics.Counters{
			FPDUsSent: map[string]uint64{"write": 3, "send": 1}, FPDUsReceived: map[string]uint64{"read_response": 2},
			BytesSent: map[string]uint64{"write": out}, BytesReceived: map[string]uint64{"read_response": in},
			ReadsIssued: 2, ReadsQueued: 5, CRCErrors: 1,
			TerminatesSent: []metrics.Terminate{{Code: "0x1100", Count: 1}},
		}}
	}
	r := &metrics.Report{
		Device: metrics.Counters{
			FPDUsSent: map[string]uint64{"write": 10, "send": 2}, FPDUsReceived: map[string]uint64{"send": 4},
			BytesSent: map[string]uint64{"write": 3 << 20}, BytesReceived: map[string]uint64{"send": 100},
			Connections: 5, Closed: 3, CRCErrors: 2,
			TerminatesReceived: []metrics.Terminate{{Code: "0x2002", Count: 2}},
		},
		Listeners: []metrics.Listener{
			{Addr: "0.0.0.0:7174", Accepted: 9, Refused: map[string]uint64{"bad_request": 2, "backlog_full": 1, "expired": 0}},
			{Addr: "[::]:7175", Accepted: 1, Refused: map[string]uint64{}},
		},
		QueuePairs: []metrics.QueuePair{qp(7, 1500000, 2048), qp(9, 10, 0)},
	}
	var b strings.Builder
	require.NoError(t, Table(&b, r, nil, 0))
	require.Equal(t, `device: 5 connections, 2 open; sent 12 FPDUs, 3 MiB; received 4 FPDUs, 100 B; 2 CRC errors; Terminates 0 sent, 2 received
listener 0.0.0.0:7174: 9 accepted, 3 refused (bad_request 2, backlog_full 1)
listener [::]:7175: 1 accepted, 0 refused
  QPN          REMOTE  FPDUS OUT  FPDUS IN  BYTES OUT  BYTES IN  RATE OUT  RATE IN  READS IN  READS OUT  IRD  ORD  TERM OUT  TERM IN  CRC ERR
    7  10.0.0.2:40000          4         2    1.4 MiB     2 KiB         -        -         5          2   16    8         1        0        1
    9  10.0.0.2:40000          4         2       10 B       0 B         -        -         5          2   16    8         1        0        1
`, b.String())

	// A second report half a second later: queue pair 7 sent 500000 bytes
	// more (8 Mb/s), 9 is new (no rate yet).
	prev := &metrics.Report{QueuePairs: []metrics.QueuePair{qp(7, 1000000, 2048)}}
	b.Reset()
	require.NoError(t, Table(&b, r, prev, 500*time.Millisecond))
	rows := strings.Split(b.String(), "\n")
	require.Equal(t, []string{"7", "10.0.0.2:40000", "4", "2", "1.4", "MiB", "2", "KiB", "8.0", "Mb/s", "0.0", "Mb/s", "5", "2", "16", "8", "1", "0", "1"}, strings.Fields(rows[4]))
	require.Equal(t, []string{"-", "-"}, strings.Fields(rows[5])[8:10])

	b.Reset()
	require.NoError(t, Table(&b, &metrics.Report{}, nil, 0))
	require.Equal(t, "device: 0 connections, 0 open; sent 0 FPDUs, 0 B; received 0 FPDUs, 0 B; 0 CRC errors; Terminates 0 sent, 0 received\nno live queue pairs\n", b.String())

	b.Reset()
	sinks := &metrics.Report{Sinks: []metrics.Sink{
		{Name: "/pmem/a", Mode: "dax", Durable: true, Persists: 4, BytesPersisted: 8192, PersistSeconds: 0.0002},
		{Name: "/tmp/b", Mode: "volatile"},
	}}
	require.NoError(t, Table(&b, sinks, nil, 0))
	require.Equal(t, []string{
		"sink /pmem/a: dax (durable); 4 persists of 8 KiB, mean 50µs; 0 persist errors",
		"sink /tmp/b: volatile (not durable); 0 persists of 0 B, mean -; 0 persist errors",
	}, strings.Split(b.String(), "\n")[1:3])
}

// Once prints one table of the live queue pairs; a live watch prints one
// per interval, a blank line between (or the screen cleared before each
// with Clear), with rates from the second on, and ends without error when
// its context does.
func TestWatch(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 1)
	p.WriteSendRead(t)
	srv, err := Serve("127.0.0.1:0", metrics.NewSource(dev), false)
	require.NoError(t, err)
	defer srv.Close()

	var once strings.Builder
	require.NoError(t, (&Watch{Addr: srv.Addr().String(), Out: &once, Once: true, Interval: time.Hour}).Run(context.Background()))
	require.True(t, strings.HasPrefix(once.String(), "device: 2 connections, 2 open;"), once.String())
	require.Equal(t, 2, strings.Count(once.String(), p.Listener.Addr().(*net.TCPAddr).IP.String()), "a row per queue pair: %s", once.String())
	require.NotContains(t, once.String(), "Mb/s", "no rates in a first table")

	for _, clear := range []bool{false, true} {
		var live testutil.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- (&Watch{Addr: srv.Addr().String(), Out: &live, Interval: 10 * time.Millisecond, Clear: clear}).Run(ctx)
		}()
		require.Eventually(t, func() bool { return strings.Count(live.String(), "device: ") >= 3 }, 10*time.Second, 5*time.Millisecond)
		cancel()
		require.NoError(t, <-done, "the end of a live table is no error")
		tables := strings.Split(live.String(), "device: ")[1:]
		require.Contains(t, tables[1], "Mb/s", "the second table has rates")
		if clear {
			require.Equal(t, strings.Count(live.String(), "device: "), strings.Count(live.String(), "\x1b[H\x1b[2J"))
			require.NotContains(t, live.String(), "\n\n")
		} else {
			require.NotContains(t, live.String(), "\x1b[")
			require.Contains(t, live.String(), "\n\ndevice: ")
		}
	}
	p.Closed(t)
}

// A watch of something that is not an endpoint ends with Fetch's error.
func TestWatch_NotAnEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // a closed local port: nothing answers
	err = (&Watch{Addr: addr, Out: &strings.Builder{}, Interval: time.Millisecond}).Run(context.Background())
	var op *net.OpError
	require.ErrorAs(t, err, &op, "nothing listens there")
}
