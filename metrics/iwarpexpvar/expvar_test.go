package iwarpexpvar_test

import (
	"encoding/json"
	"expvar"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/metrics"
	"github.com/iwarp-go/iwarp-go/metrics/iwarpexpvar"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var runs int

// /debug/vars carries the report under its one name, read at the request:
// what the queue pairs did so far, each queue pair's own counters.
func TestPublish_DebugVars(t *testing.T) {
	dev, err := conn.NewDevice()
	require.NoError(t, err)
	p := conntest.NewPair(t, dev, 1)
	// A new name each run: expvar names are the process's for good.
	runs++
	name := fmt.Sprintf("iwarp_test_%d", runs)
	iwarpexpvar.Publish(name, metrics.NewSource(dev, p.Listener), iwarpexpvar.WithQueuePairs())
	p.WriteSendRead(t)

	rec := httptest.NewRecorder()
	expvar.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var vars map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &vars))
	var r metrics.Report
	require.NoError(t, json.Unmarshal(vars[name], &r))
	require.Equal(t, uint64(2), r.Device.FPDUsSent["write"], "the RTR and the Write")
	require.Equal(t, uint64(2), r.Device.Connections)
	require.Len(t, r.Listeners, 1)
	require.Len(t, r.QueuePairs, 2)
	for _, q := range r.QueuePairs {
		require.Contains(t, []uint32{p.Client.QPN(), p.Server.QPN()}, q.QPN)
	}
	p.Closed(t)

	require.Empty(t, iwarpexpvar.Func(metrics.NewSource(dev))().(metrics.Report).QueuePairs, "queue pairs only on request")
}

func ExamplePublish() {
	dev, err := conn.NewDevice() // or conn.DefaultDevice(), the one conn.NewPD uses
	if err != nil {
		panic(err)
	}
	iwarpexpvar.Publish("iwarp", metrics.NewSource(dev))
	// An HTTP server with expvar's handler (net/http's default mux has it
	// at /debug/vars) now shows the counters; here, the variable itself:
	fmt.Println(expvar.Get("iwarp").String())
	// Output:
	// {"device":{"crc_errors":0,"reads_queued":0,"reads_issued":0,"reads_held":0,"connections":0,"closed":0,"setup_seconds":0,"rejects_received":0}}
}
