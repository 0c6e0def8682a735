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
	// Each client's output and exit status, between marker lines, so that
	// each is judged on its own (lab.RpingOK).
	script := primeNeighbour + fmt.Sprintf(`pids=""
for i in $(seq %d); do
	(rping -c -a %s -p %s -C %d -S 64 -v -V > /tmp/srq-$i.out 2>&1; echo $? > /tmp/srq-$i.rc) &
	pids="$pids $!"
done
for p in $pids; do wait $p; done
for i in $(seq %d); do
	echo "=== client $i exit $(cat /tmp/srq-$i.rc)"
	cat /tmp/srq-$i.out
done`, clients, hostIP, m[1], count, clients)
	res := run(t, ctx, 4*time.Minute, "rping-c-srq", script)
	require.True(t, res.OK(), "%s\n%s", res, hp.result())
	outs := clientOutputs(res.Stdout)
	require.Len(t, outs, clients, "%s", res)
	for _, o := range outs {
		// The client's own words come last: a log cut to its tail still
		// shows why a client failed, not only the server's disconnects.
		assert.True(t, rpingOK(t, o.code, o.out, count), "client %d exit %d:\n%s\n%s\nclient %d:\n%s", o.n, o.code, res, hp.result(), o.n, o.out)
	}
	assert.Len(t, pingLine.FindAllString(res.Stdout, -1), clients*count, "the clients' pings")
	require.NoError(t, hp.cmd.Process.Signal(os.Interrupt))
	r := hp.wait(t, 30*time.Second)
	require.True(t, r.OK(), "%s", r)
	assert.Len(t, pingLine.FindAllString(r.Stdout, -1), clients*count, "iwarp-peer's pings")
}

type clientOutput struct {
	n, code int
	out     string
}

// clientOutputs splits the SRQ script's output at its "=== client N exit
// CODE" lines.
func clientOutputs(s string) []clientOutput {
	var outs []clientOutput
	for _, l := range strings.SplitAfter(s, "\n") {
		var o clientOutput
		if _, err := fmt.Sscanf(l, "=== client %d exit %d\n", &o.n, &o.code); err == nil {
			outs = append(outs, o)
			continue
		}
		if len(outs) > 0 {
			outs[len(outs)-1].out += l
		}
	}
	return outs
}
