//go:build interop

package siw_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoRpingSRQ: sixteen rdma-core rping clients over siw at once against
// iwarp-peer rping -s -P --srq 16, whose connections all take their
// receives from one shared receive queue of 16 receives. Every client
// validates each of its pings (-V); the server prints every ping it read.
func TestGoRpingSRQ(t *testing.T) {
	const clients, count = 16, 20
	ctx := scenario(t, 6*time.Minute)
	record(t, matrixRow{Scenario: "rping, 16 clients at once on one SRQ", Initiator: siwName, Responder: goName,
		CRC: "off (siw's default)", MPA: "rev 2 enhanced, IRD/ORD 1/1",
		Checks: fmt.Sprintf("%d clients at once, -C %d -V at 64 bytes; the server's connections share --srq %d", clients, count, clients)})
	hp := startHost(t, ctx, "rping-s-srq", "rping", "-s", "-a", "127.0.0.1", "-p", "0", "-P", "--srq", strconv.Itoa(clients), "-v")
	m := listeningPort.FindStringSubmatch(hp.waitOutput(t, 30*time.Second, "listening on port "))
	require.NotNil(t, m, "%s", hp.result())
	script := primeNeighbour + fmt.Sprintf(`pids=""
for i in $(seq %d); do
	rping -c -a %s -p %s -C %d -S 64 -v -V > /tmp/srq-$i.out 2>&1 &
	pids="$pids $!"
done
fail=0
for p in $pids; do wait $p || fail=$((fail+1)); done
cat /tmp/srq-*.out
echo "clients failed: $fail"
[ $fail -eq 0 ]`, clients, hostIP, m[1], count)
	res := run(t, ctx, 4*time.Minute, "rping-c-srq", script)
	// The clients' own words come last: a log cut to its tail still shows
	// why a client failed, not only the server's disconnect lines.
	require.True(t, res.OK(), "%s\n%s\nthe clients' lines other than pings:\n%s", res, hp.result(), withoutPings(res.Stdout+res.Stderr))
	assert.Len(t, pingLine.FindAllString(res.Stdout, -1), clients*count, "the clients' pings")
	require.NoError(t, hp.cmd.Process.Signal(os.Interrupt))
	r := hp.wait(t, 30*time.Second)
	require.True(t, r.OK(), "%s", r)
	assert.Len(t, pingLine.FindAllString(r.Stdout, -1), clients*count, "iwarp-peer's pings")
}

// withoutPings is rping output less its ping lines, with how many it had.
func withoutPings(s string) string {
	var b strings.Builder
	pings := 0
	for _, l := range strings.SplitAfter(s, "\n") {
		if pingLine.MatchString(l) {
			pings++
			continue
		}
		b.WriteString(l)
	}
	return fmt.Sprintf("%s(and %d ping lines)", b.String(), pings)
}
