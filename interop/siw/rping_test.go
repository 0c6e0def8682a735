//go:build interop

package siw_test

import (
	"context"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
	"github.com/stretchr/testify/require"
)

var pingLine = lab.PingLine

// rpingPair runs rping server and client inside the guest over siw0 and
// checks that all count iterations passed on both sides.
func rpingPair(t *testing.T, ctx context.Context, count int) {
	t.Helper()
	srv := server(t, ctx, "rping-s", "exec rping -s -a "+guestIP+" -p 7174 -C 10 -v", 7174)
	cli := run(t, ctx, 90*time.Second, "rping-c", "exec rping -c -a "+guestIP+" -p 7174 -C 10 -v -V")
	require.True(t, rpingResultOK(t, cli, count), "%s", cli)
	sres := wait(t, ctx, srv, 60*time.Second)
	require.True(t, rpingResultOK(t, sres, count), "%s", sres)
}

// TestRping: rdma-core's rping between two processes in the guest, siw↔siw.
func TestRping(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	rpingPair(t, ctx, 10)
}

// rpingOK is lab.RpingOK, saying so in the log when it forgave the exit
// race, so that a run shows how often the race came.
func rpingOK(t *testing.T, code int, out string, pings int) bool {
	ok := lab.RpingOK(code, out, pings)
	if ok && code != 0 {
		t.Logf("rping exited %d after a whole run: rdma-core 44's exit race, not a failure", code)
	}
	return ok
}

// rpingResultOK is rpingOK for a guest job that ran rping.
func rpingResultOK(t *testing.T, r *lab.Result, pings int) bool {
	return r != nil && r.Err == "" && rpingOK(t, r.Code, r.Stdout+r.Stderr, pings)
}
