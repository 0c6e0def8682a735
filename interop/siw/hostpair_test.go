//go:build interop

package siw_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/dissect"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// Host↔guest pairs: iwarp-peer on the host, rdma-core programs over siw
// in the guest.

const (
	goName  = "iwarp-go"
	siwName = "siw"
)

// iwtPair is the outcome of one iwtest session between the host and the
// guest.
type iwtPair struct {
	goRes *hostResult
	cRes  *lab.Result
	pcap  string // full capture on eth0, or "" if none was taken
}

// goOut and cOut are each side's stdout and stderr.
func (p *iwtPair) goOut() string { return p.goRes.Stdout + p.goRes.Stderr }
func (p *iwtPair) cOut() string  { return p.cRes.Stdout + p.cRes.Stderr }

// iwtestHostGuest runs one iwtest session: with goServer, iwarp-peer
// iwtest -s on the host and the C client in the guest (connecting to
// 10.0.2.2); otherwise the C server in the guest and iwarp-peer iwtest -c
// on the host (through the forwarded port). capture names a full capture
// of the connection on the guest's eth0 ("" for none).
func iwtestHostGuest(t *testing.T, ctx context.Context, goServer bool, goArgs, cArgs string, timeout time.Duration, capture string) *iwtPair {
	t.Helper()
	p := &iwtPair{}
	var stop func() string
	if goServer {
		hp := startHost(t, ctx, "iwtest-s", append([]string{"iwtest", "-s", "-a", "127.0.0.1", "-p", "0", "-w", "60"}, strings.Fields(goArgs)...)...)
		port := listenPort(t, hp.waitOutput(t, 30*time.Second, "LISTENING"))
		if capture != "" {
			stop = captureEth0(t, ctx, capture, port)
		}
		p.cRes = run(t, ctx, timeout, "iwtest-c", primeNeighbour+fmt.Sprintf("exec iwtest -c -a %s -p %d %s", hostIP, port, cArgs))
		p.goRes = hp.wait(t, time.Minute)
	} else {
		if capture != "" {
			stop = captureEth0(t, ctx, capture, iwtestPort)
		}
		// -w: a server whose client fails before connecting gives up soon.
		srv := server(t, ctx, "iwtest-s", fmt.Sprintf("exec iwtest -s -a %s -p %d -w 30 %s", guestIP, iwtestPort, cArgs), iwtestPort)
		host, port := guestPortAddr(t, iwtestPort)
		p.goRes = runHost(t, ctx, timeout, "iwtest-c", append([]string{"iwtest", "-c", "-a", host, "-p", port}, strings.Fields(goArgs)...)...)
		if p.goRes.OK() {
			p.cRes = wait(t, ctx, srv, time.Minute)
		} else {
			// The session failed; the server may be waiting for a
			// connection that never came.
			res, err := srv.Wait(ctx, 5*time.Second)
			if err != nil {
				res, err = srv.Stop(ctx, 2*time.Second)
			}
			require.NoError(t, err, "%s", res)
			p.cRes = res
		}
	}
	if stop != nil {
		p.pcap = stop()
	}
	return p
}

// captureEth0 records the whole packets of one TCP port on the guest's
// eth0, where guest↔host traffic passes.
func captureEth0(t *testing.T, ctx context.Context, name string, port int) (stop func() string) {
	t.Helper()
	c := startMemCapture(t, ctx, name, "eth0", fmt.Sprintf("tcp port %d", port))
	return func() string {
		t.Helper()
		return c.stop(t, ctx)
	}
}

// roles names initiator and responder for the matrix.
func roles(goServer bool) (initiator, responder string) {
	if goServer {
		return siwName, goName
	}
	return goName, siwName
}

// wireCheck is what tshark finds in a capture: MPA frames, FPDUs by CRC
// verdict, and malformed frames.
type wireCheck struct {
	requests, replies   int
	goodCRC, badCRC     int
	malformed           int
	crcFlags, revisions []string // of Request then Reply
	opcodes             map[string]int
}

// checkWire dissects a capture with tshark, streaming its verbose output
// (captures of large transfers give hundreds of megabytes of text).
func checkWire(t *testing.T, pcap string) *wireCheck {
	t.Helper()
	w := &wireCheck{opcodes: map[string]int{}}
	path, err := exec.LookPath("tshark")
	require.NoError(t, err)
	base := append([]string{"-r", pcap}, dissect.TsharkArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(base, "-V")...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "(Good CRC32)"):
			w.goodCRC++
		case strings.Contains(line, "Bad CRC32"):
			w.badCRC++
		case strings.Contains(line, "[Malformed Packet"):
			w.malformed++
		case strings.Contains(line, "ID Req frame:"):
			w.requests++
		case strings.Contains(line, "ID Rep frame:"):
			w.replies++
		}
	}
	require.NoError(t, cmd.Wait(), "tshark: %s", stderr.String())
	flags := tshark(t, pcap, "-Y", "iwarp_mpa.req || iwarp_mpa.rep", "-T", "fields", "-e", "iwarp_mpa.crc_flag", "-e", "iwarp_mpa.rev")
	for _, line := range strings.Split(strings.TrimSpace(flags), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 2 {
			w.crcFlags = append(w.crcFlags, strings.ReplaceAll(strings.ReplaceAll(f[0], "True", "1"), "False", "0"))
			w.revisions = append(w.revisions, f[1])
		}
	}
	for _, p := range rdmapPDUs(t, pcap, "iwarp_rdma.opcode", "") {
		w.opcodes[p.op]++
	}
	return w
}

// primeNeighbour is run in the guest right before a program there
// connects to a host listener through rdma_cm: the ping leaves a valid
// neighbour entry for the host (10.0.2.2; it stays valid, REACHABLE then
// STALE, for minutes). Without an entry, rdma_resolve_addr to 10.0.2.2 was
// seen to get no ADDR_RESOLVED event within iwtest's 30 s. In Linux 6.1
// (drivers/infiniband/core/addr.c) rdma_resolve_ip sends the ARP request
// (dst_fetch_ha, neigh_event_send) before it queues its request; a
// pending request is retried when a neighbour update arrives
// (netevent_callback) and otherwise only when its whole timeout expires
// (process_one_req). QEMU's user network answers ARP at once, so the
// update can come before the request is queued and the resolution then
// waits for the timeout. TCP programs (nc) never hit this. (The guest's
// busybox ip and arp cannot add a permanent entry.)
const primeNeighbour = "ping -c 1 -W 2 " + hostIP + " >/dev/null 2>&1; "
