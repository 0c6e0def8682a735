//go:build interop

package siw_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/internal/iwtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const iwtestPort = 7175

var allTests = []string{"write", "read", "send", "send_se", "send_inv", "send_sge", "write_sge"}

// iwtestPair runs the C test program as server and client inside the guest
// and returns both results. The server takes its plan from the client.
func iwtestPair(t *testing.T, ctx context.Context, srvArgs, cliArgs string, timeout time.Duration) (srv, cli map[string]string, sout, cout string) {
	t.Helper()
	p := server(t, ctx, "iwtest-s", fmt.Sprintf("exec iwtest -s -a %s -p %d %s", guestIP, iwtestPort, srvArgs), iwtestPort)
	cres := run(t, ctx, timeout, "iwtest-c", fmt.Sprintf("exec iwtest -c -a %s -p %d %s", guestIP, iwtestPort, cliArgs))
	sres := wait(t, ctx, p, 60*time.Second)
	return map[string]string{"code": fmt.Sprint(sres.Code)}, map[string]string{"code": fmt.Sprint(cres.Code)},
		sres.Stdout + sres.Stderr, cres.Stdout + cres.Stderr
}

// TestCprogAllOperations: every operation of iwtest, both directions of
// data flow, from 1 byte to 1 MiB, twice each, siw↔siw.
func TestCprogAllOperations(t *testing.T) {
	ctx := scenario(t, 6*time.Minute)
	sizes := []string{"1", "7", "4096", "65536", "1048576"}
	srv, cli, sout, cout := iwtestPair(t, ctx, "-S 1m", "-T all -S "+strings.Join(sizes, ",")+" -n 2", 4*time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	conntest.RequireAllOK(t, cout, allTests, sizes)
	conntest.RequireAllOK(t, sout, allTests, sizes)
	for _, r := range conntest.Lines(cout, "RESULT") {
		require.Equal(t, "2", r["iters"])
	}
}

// TestCprogLargeMessages: 16 MiB Writes, Reads and Sends.
func TestCprogLargeMessages(t *testing.T) {
	ctx := scenario(t, 6*time.Minute)
	srv, cli, sout, cout := iwtestPair(t, ctx, "-S 16m", "-T write,read,send -S 16m", 5*time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	conntest.RequireAllOK(t, cout, []string{"write", "read", "send"}, []string{"16777216"})
}

// TestCprogPrivateData: connect and accept private data reach the other
// side's application, and the IRD/ORD asked for come through.
func TestCprogPrivateData(t *testing.T) {
	ctx := scenario(t, 6*time.Minute)
	srv, cli, sout, cout := iwtestPair(t, ctx, "-S 4k -P accept-data --ird 4 --ord 4", "-T send -S 4k -P hello-from-client --ird 8 --ord 2", 2*time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	conn := conntest.Lines(sout, "CONNECT")
	require.Len(t, conn, 1, sout)
	assert.Equal(t, "hello-from-client", conn[0]["text"])
	// siw hands the passive side the initiator's IRD as its ORD limit and
	// the initiator's ORD as its IRD (RFC 6581 block, swapped viewpoint).
	assert.Equal(t, "2", conn[0]["ird"], sout)
	assert.Equal(t, "8", conn[0]["ord"], sout)
	est := conntest.Lines(cout, "ESTABLISHED")
	require.Len(t, est, 1, cout)
	assert.Equal(t, "accept-data", est[0]["text"])
}

// TestCprogReject: the server rejects with private data; the client sees
// the reject and its private data.
func TestCprogReject(t *testing.T) {
	ctx := scenario(t, 6*time.Minute)
	srv, cli, sout, cout := iwtestPair(t, ctx, "--reject -P go-away", "--expect-reject", time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	rej := conntest.Lines(cout, "REJECT")
	require.Len(t, rej, 1, cout)
	assert.Equal(t, "go-away", rej[0]["text"], cout)
	assert.Equal(t, "676f2d61776179", rej[0]["private_data"], cout)
}

// pattern is the data pattern of PROTOCOL.md §6 as iwarp-peer's iwtest
// makes it (internal/iwtest, checked there against the protocol's test
// vectors).
func pattern(test, dir, iter, size uint32) []byte {
	return iwtest.Pattern(iwtest.Test(test), uint8(dir), iter, size)
}

// TestCprogPattern: the data pattern the C iwtest uses is the one
// PROTOCOL.md defines (checked against its test vectors) and the one the
// Go iwtest uses.
func TestCprogPattern(t *testing.T) {
	ctx := scenario(t, 2*time.Minute)
	assert.Equal(t, "bc11211d9712bb31", hex.EncodeToString(pattern(1, 0, 0, 8)))
	assert.Equal(t, "2ea232f8ab1a165f0883def6e5", hex.EncodeToString(pattern(3, 1, 2, 13)))
	cases := [][4]uint32{{1, 0, 0, 8}, {3, 1, 2, 13}, {7, 1, 9, 4096}, {5, 0, 1, 1}, {2, 1, 0, 1021}}
	var script strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&script, "iwtest --print-pattern %d,%d,%d,%d\n", c[0], c[1], c[2], c[3])
	}
	res := run(t, ctx, 30*time.Second, "iwtest-pattern", "set -e\n"+script.String())
	mustOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, len(cases))
	for i, c := range cases {
		assert.Equal(t, hex.EncodeToString(pattern(c[0], c[1], c[2], c[3])), lines[i], "pattern %v", c)
	}
}
