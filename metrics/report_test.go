package metrics_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
)

// exchange runs conntest.Pair.WriteSendRead on a new pair on dev.
func exchange(t *testing.T, dev *conn.Device) *conntest.Pair {
	p := conntest.NewPair(t, dev, 1)
	p.WriteSendRead(t)
	return p
}

// What each side sent of exchange's traffic, by opcode label: FPDUs and
// ULPDU bytes (RFC 5041 §5: a tagged header of 14 bytes, an untagged one
// of 18; RFC 5040 §4.4: a Read Request body of 28).
var (
	clientFPDUs = map[string]uint64{"write": 2, "send": 1, "read_request": 1}
	clientBytes = map[string]uint64{"write": 14 + 14 + 100, "send": 18 + 10, "read_request": 18 + 28}
	serverFPDUs = map[string]uint64{"read_response": 1}
	serverBytes = map[string]uint64{"read_response": 14 + 64}
)

func TestSource_ReportsDeviceListenersAndQueuePairs(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := exchange(t, dev)
	src := metrics.NewSource(dev, p.Listener)
	src.AddListener(p.Listener) // once only

	r := src.Report(true)
	both := func(a, b map[string]uint64) map[string]uint64 {
		m := map[string]uint64{}
		for k, v := range a {
			m[k] += v
		}
		for k, v := range b {
			m[k] += v
		}
		return m
	}
	d := r.Device
	// Both ends are the device's: each FPDU is sent and received by it.
	require.Equal(t, both(clientFPDUs, serverFPDUs), d.FPDUsSent)
	require.Equal(t, both(clientFPDUs, serverFPDUs), d.FPDUsReceived)
	require.Equal(t, both(clientBytes, serverBytes), d.BytesSent)
	require.Equal(t, both(clientBytes, serverBytes), d.BytesReceived)
	require.Equal(t, uint64(1), d.ReadsIssued)
	require.Equal(t, uint64(1), d.ReadsQueued)
	require.Equal(t, uint64(2), d.Connections)
	require.Zero(t, d.Closed)
	require.Positive(t, d.SetupSeconds)
	require.Zero(t, d.CRCErrors+d.ReadsHeld+d.RejectsReceived)
	require.Empty(t, d.TerminatesSent)

	require.Len(t, r.Listeners, 1)
	l := r.Listeners[0]
	require.Equal(t, p.Listener.Addr().String(), l.Addr)
	require.Equal(t, uint64(1), l.Accepted)
	require.Len(t, l.Refused, len(metrics.RefusalReasons), "every reason, zero or not")
	for reason, n := range l.Refused {
		require.Zero(t, n, reason)
	}

	require.Len(t, r.QueuePairs, 2)
	byQPN := map[uint32]metrics.QueuePair{}
	for _, q := range r.QueuePairs {
		byQPN[q.QPN] = q
	}
	require.Less(t, r.QueuePairs[0].QPN, r.QueuePairs[1].QPN, "QPN order")
	cq, sq := byQPN[p.Client.QPN()], byQPN[p.Server.QPN()]
	require.Equal(t, clientFPDUs, cq.FPDUsSent)
	require.Equal(t, clientBytes, cq.BytesSent)
	require.Equal(t, serverFPDUs, cq.FPDUsReceived)
	require.Equal(t, serverFPDUs, sq.FPDUsSent)
	require.Equal(t, clientBytes, sq.BytesReceived)
	require.Equal(t, p.Listener.Addr().String(), cq.Remote)
	require.Equal(t, p.Listener.Addr().String(), sq.Local)
	require.Equal(t, cq.Local, sq.Remote)
	require.Equal(t, conn.DefaultIRD, cq.IRD)
	sent, received := cq.FPDUs()
	require.Equal(t, uint64(4), sent)
	require.Equal(t, uint64(1), received)
	bs, br := sq.Bytes()
	require.Equal(t, uint64(14+64), bs)
	require.Equal(t, uint64(128+28+46), br)

	require.Empty(t, src.Report(false).QueuePairs, "queue pairs only on request")

	// Closed queue pairs leave the list and stay in the totals.
	p.Closed(t)
	// Close returns once the queue pair is closed; its count of closes
	// follows a moment later.
	require.Eventually(t, func() bool { return src.Report(false).Device.Closed == 2 }, 10*time.Second, time.Millisecond)
	r = src.Report(true)
	require.Empty(t, r.QueuePairs)
	require.Equal(t, d.FPDUsSent, r.Device.FPDUsSent)

	src.RemoveListener(p.Listener)
	require.Empty(t, src.Report(false).Listeners)
}

// Terminates are reported by code, on the side that sent and the side
// that received them: a Write to an STag that names no region is answered
// with DDP's Invalid STag (RFC 5041 §7.2, 0x1100).
func TestSource_Terminates(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 0)
	bad := p.ServerMR.Remote(0)
	bad.STag ^= 0xffffff00
	require.NoError(t, p.Client.PostSend(conn.SendWR{Op: conn.OpWrite, SGL: []conn.SGE{p.ClientMR.SGE(0, 8)}, Remote: bad}))
	p.Ended(t)
	r := metrics.NewSource(dev).Report(false)
	want := []metrics.Terminate{{Code: "0x1100", Name: "DDP Tagged Buffer Error: Invalid Steering Tag", Count: 1}}
	require.Equal(t, want, r.Device.TerminatesSent)
	require.Equal(t, want, r.Device.TerminatesReceived)
	require.Equal(t, uint64(1), r.Device.FPDUsSent["terminate"])
	s, rx := r.Device.Terminates()
	require.Equal(t, [2]uint64{1, 1}, [2]uint64{s, rx})
}

func TestLabels(t *testing.T) {
	want := []string{"write", "read_request", "read_response", "send", "send_invalidate", "send_se", "send_se_invalidate", "terminate",
		"immediate", "immediate_se", "atomic_request", "atomic_response", "0xc", "0xd", "0xe", "extension"}
	for op, w := range want {
		require.Equal(t, w, metrics.OpcodeLabel(rdmap.Opcode(op)))
	}
	require.Equal(t, metrics.DefinedOpcodes, 8)
	require.Equal(t, "0x1100", metrics.CodeLabel(termcode.DDPTaggedInvalidSTag))
	require.Equal(t, "0x2001", metrics.CodeLabel(termcode.Make(termcode.LLP, 0, 1)))
	require.Equal(t, "DDP Tagged Buffer Error: Invalid Steering Tag", metrics.CodeName(termcode.DDPTaggedInvalidSTag))
}

// Every refusal conn.ListenerStats counts has a reason, and each reason
// reads its own counter.
func TestRefusalReasons_CoverListenerStats(t *testing.T) {
	var s conn.ListenerStats
	v := reflect.ValueOf(&s).Elem()
	counters := 0
	for i := range v.NumField() {
		if v.Type().Field(i).Name != "Accepted" {
			v.Field(i).SetUint(uint64(100 + i))
			counters++
		}
	}
	require.Len(t, metrics.RefusalReasons, counters)
	seen := map[uint64]string{}
	for _, r := range metrics.RefusalReasons {
		n := r.Count(&s)
		require.GreaterOrEqual(t, n, uint64(100), r.Label)
		require.NotContains(t, seen, n, "%s reads the counter %s reads", r.Label, seen[n])
		seen[n] = r.Label
	}
}

// The JSON is what expvar shows and stat reads: it decodes back to the
// same report.
func TestReport_JSONRoundTrip(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := exchange(t, dev)
	r := metrics.NewSource(dev, p.Listener).Report(true)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(b), `"fpdus_sent":{"read_request":1,"read_response":1,"send":1,"write":2}`)
	var back metrics.Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, r, back)
	p.Closed(t)
}
