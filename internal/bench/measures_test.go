package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFillMeasures_Loopback(t *testing.T) {
	r := Result{LatIters: 100, LatCPUus: ptr(6.5), TCPLatCPUus: ptr(5), LatSlowPct: 1.5, TCPLatSlowPct: ptr(1.0)}
	fillMeasures(&r, true)
	require.InEpsilon(t, 6500.0, *r.CPUnsPerOp, 1e-12, "one process: its CPU is both endpoints'")
	require.InEpsilon(t, 5000.0, *r.TCPCPUnsPerOp, 1e-12)
	require.InEpsilon(t, 1.3, *r.CPURatio, 1e-12)
	require.InEpsilon(t, 1.5, *r.LatSlowRatio, 1e-12)
}

func TestFillMeasures_TwoProcesses(t *testing.T) {
	r := Result{LatIters: 100, LatCPUus: ptr(4), ServerLatCPUus: ptr(3), TCPLatCPUus: ptr(5)}
	fillMeasures(&r, false)
	require.InEpsilon(t, 7000.0, *r.CPUnsPerOp, 1e-12, "the client's plus the server's")
	require.InEpsilon(t, 1.4, *r.CPURatio, 1e-12)

	// Without the server's report the client's CPU is not both ends'.
	r = Result{LatIters: 100, LatCPUus: ptr(4), TCPLatCPUus: ptr(5)}
	fillMeasures(&r, false)
	require.Nil(t, r.CPUnsPerOp)
	require.Nil(t, r.CPURatio)
	require.NotNil(t, r.TCPCPUnsPerOp)
}

func TestFillMeasures_Missing(t *testing.T) {
	// No CPU clock on this system, no baseline, no latency phase.
	var r Result
	fillMeasures(&r, true)
	require.Nil(t, r.CPUnsPerOp)
	require.Nil(t, r.TCPCPUnsPerOp)
	require.Nil(t, r.CPURatio)
	require.Nil(t, r.LatSlowRatio, "no latency phase, no share")
	r = Result{LatCPUus: ptr(2), TCPLatCPUus: ptr(0)}
	fillMeasures(&r, true)
	require.Nil(t, r.CPURatio, "a zero baseline gives no ratio")
}

func TestShareRatio(t *testing.T) {
	require.InEpsilon(t, 0.5, *shareRatio(0.25, 0.5), 1e-12)
	require.Equal(t, 0.0, *shareRatio(0, 0.5))
	require.Equal(t, 1.0, *shareRatio(0, 0), "neither slowed a round trip")
	require.Nil(t, shareRatio(0.1, 0), "no factor relates a share to none")
}

// The measures' JSON names, which scripts/bench.sh reads.
func TestFillMeasures_JSON(t *testing.T) {
	r := Result{LatIters: 10, LatCPUus: ptr(2), TCPLatCPUus: ptr(1), LatSlowPct: 2, TCPLatSlowPct: ptr(4)}
	fillMeasures(&r, true)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, 2000.0, m["cpu_ns_per_op"])
	require.Equal(t, 1000.0, m["tcp_cpu_ns_per_op"])
	require.Equal(t, 2.0, m["cpu_ratio"])
	require.Equal(t, 0.5, m["lat_slow_ratio"])
	b, err = json.Marshal(Result{})
	require.NoError(t, err)
	require.NotContains(t, string(b), "cpu_ns_per_op", "absent when not measured")
}
