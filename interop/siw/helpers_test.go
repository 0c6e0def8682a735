//go:build interop

package siw_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// guestIP is the guest's eth0 address. rdma_cm on 6.1 cannot use 127.0.0.1
// (or any lo address) with iWARP, so siw↔siw inside the guest goes through
// siw0 on this address; Linux routes that traffic over lo.
const guestIP = "10.0.2.15"

// scenario gives a test its time budget, ties guest jobs to it and records
// the headers of all its TCP traffic in the guest (eth0 and lo) into
// all-<test name>.pcap, which is kept with the logs if the test fails.
func scenario(t *testing.T, budget time.Duration) context.Context {
	t.Helper()
	ctx := scenarioCase(t, budget)
	_, err := vm.StartCapture(ctx, "all-"+t.Name(), "any", "tcp", 200)
	require.NoError(t, err)
	return ctx
}

// scenarioCase is scenario without the header capture, for the cases of
// a scenario that records them already (starting a capture per case
// costs half a second each): a time budget, and the case's guest jobs
// and host output kept if it fails.
func scenarioCase(t *testing.T, budget time.Duration) context.Context {
	t.Helper()
	// Registered before Track, so it runs after Track has set up the
	// test's folder of kept files.
	t.Cleanup(func() { keepHostArtifacts(t) })
	vm.Track(t)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return ctx
}

// server starts a guest command in the background and waits until its
// listening socket exists.
func server(t *testing.T, ctx context.Context, name, script string, port int) *lab.Proc {
	t.Helper()
	p, err := vm.StartListening(ctx, 60*time.Second, name, script, port)
	require.NoError(t, err)
	return p
}

// run runs a guest command to completion and requires that it started.
func run(t *testing.T, ctx context.Context, timeout time.Duration, name, script string) *lab.Result {
	t.Helper()
	res, err := vm.Run(ctx, timeout, name, script)
	require.NoError(t, err, "%s", res)
	return res
}

func mustOK(t *testing.T, res *lab.Result) {
	t.Helper()
	require.True(t, res.OK(), "%s", res)
}

func wait(t *testing.T, ctx context.Context, p *lab.Proc, timeout time.Duration) *lab.Result {
	t.Helper()
	res, err := p.Wait(ctx, timeout)
	require.NoError(t, err, "%s", res)
	return res
}

// withSiw loads a siw variant for the rest of the test and the stock module
// again afterwards.
func withSiw(t *testing.T, ctx context.Context, v lab.SiwVariant, params ...string) {
	t.Helper()
	require.NoError(t, vm.LoadSiw(ctx, v, params...))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := vm.LoadSiw(cctx, lab.SiwStock); err != nil {
			t.Errorf("restoring the stock siw: %v", err)
		}
	})
}

// tshark dissects a capture on the host as iwarp-peer decode --tshark
// says (dissect.TsharkArgs: the iWARP heuristics on, RPC-over-RDMA kept
// from claiming Sends).
func tshark(t *testing.T, pcap string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("tshark")
	require.NoError(t, err, "tshark is needed on the host (build.sh installs it)")
	base := append([]string{"-r", pcap}, dissect.TsharkArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, path, append(base, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tshark: %s", stderr.String())
	return string(out)
}
