//go:build interop

package siw_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var pingLine = regexp.MustCompile(`(?m)^(server )?ping data: rdma-ping-\d+: `)

// rpingPair runs rping server and client inside the guest over siw0 and
// checks that all count iterations passed on both sides.
func rpingPair(t *testing.T, ctx context.Context, count int) {
	t.Helper()
	srv := server(t, ctx, "rping-s", "exec rping -s -a "+guestIP+" -p 7174 -C 10 -v", 7174)
	cli := run(t, ctx, 90*time.Second, "rping-c", "exec rping -c -a "+guestIP+" -p 7174 -C 10 -v -V")
	mustOK(t, cli)
	require.Len(t, pingLine.FindAllString(cli.Stdout, -1), count, "%s", cli)
	sres := wait(t, ctx, srv, 60*time.Second)
	mustOK(t, sres)
	require.Len(t, pingLine.FindAllString(sres.Stdout, -1), count, "%s", sres)
}

// TestRping: rdma-core's rping between two processes in the guest, siw↔siw.
func TestRping(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	rpingPair(t, ctx, 10)
}
