//go:build interop

package siw_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

const rpingPort = 7174

// listeningPort is the line iwarp-peer rping -s -p 0 prints.
var listeningPort = regexp.MustCompile(`(?m)^listening on port (\d+)$`)

// rpingRun is one rping exchange between the host and the guest.
type rpingRun struct {
	goRes  *hostResult
	siwRes *lab.Result
	pcap   string
}

// rpingHostGuest runs rping with count iterations of size bytes: with
// goServer, iwarp-peer rping -s on the host and rdma-core's rping -c in
// the guest; otherwise rping -s in the guest and iwarp-peer rping -c on
// the host. goFlags go to iwarp-peer (MPA variants). Both sides print
// every ping (-v), the client validates it (-V). capture names a full
// capture of the connection on eth0 ("" for none).
func rpingHostGuest(t *testing.T, ctx context.Context, goServer bool, count, size int, goFlags, capture string) *rpingRun {
	t.Helper()
	r := &rpingRun{}
	cs := fmt.Sprintf("-C %d -S %d", count, size)
	timeout := 2*time.Minute + time.Duration(count)*time.Second/2
	var stop func() string
	if goServer {
		// -p 0: the server picks a free port and prints it once it
		// listens; -d: it describes the setup.
		hp := startHost(t, ctx, "rping-s", append([]string{"rping", "-s", "-a", "127.0.0.1", "-p", "0", "-v", "-d"},
			append(strings.Fields(cs), strings.Fields(goFlags)...)...)...)
		m := listeningPort.FindStringSubmatch(hp.waitOutput(t, 30*time.Second, "listening on port "))
		require.NotNil(t, m, "%s", hp.result())
		port, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if capture != "" {
			stop = captureEth0(t, ctx, capture, port)
		}
		r.siwRes = run(t, ctx, timeout, "rping-c", primeNeighbour+fmt.Sprintf("exec rping -c -a %s -p %d %s -v -V", hostIP, port, cs))
		r.goRes = hp.wait(t, time.Minute)
	} else {
		if capture != "" {
			stop = captureEth0(t, ctx, capture, rpingPort)
		}
		srv := server(t, ctx, "rping-s", fmt.Sprintf("exec rping -s -a %s -p %d %s -v", guestIP, rpingPort, cs), rpingPort)
		host, port := guestPortAddr(t, rpingPort)
		r.goRes = runHost(t, ctx, timeout, "rping-c", append([]string{"rping", "-c", "-a", host, "-p", port, "-v", "-V", "-d"},
			append(strings.Fields(cs), strings.Fields(goFlags)...)...)...)
		r.siwRes = wait(t, ctx, srv, time.Minute)
	}
	if stop != nil {
		r.pcap = stop()
	}
	return r
}

// requireRpingOK checks both sides finished and printed every ping
// (rdma-core's side as lab.RpingOK judges it).
func requireRpingOK(t *testing.T, r *rpingRun, count int) {
	t.Helper()
	require.True(t, r.goRes.OK(), "%s\n%s", r.goRes, r.siwRes)
	require.True(t, rpingResultOK(t, r.siwRes, count), "%s\n%s", r.siwRes, r.goRes)
	assert.Len(t, pingLine.FindAllString(r.goRes.Stdout, -1), count, "iwarp-peer's pings")
	assert.Len(t, pingLine.FindAllString(r.siwRes.Stdout, -1), count, "rping's pings")
}

// goSetup is what iwarp-peer rping -d says connection setup settled.
func goSetup(t *testing.T, r *rpingRun) string {
	t.Helper()
	for _, line := range strings.Split(r.goRes.Stdout+r.goRes.Stderr, "\n") {
		if strings.Contains(line, "MPA rev") {
			return line
		}
	}
	t.Fatalf("iwarp-peer did not describe the connection:\n%s", r.goRes)
	return ""
}

func roleName(goServer bool) string {
	if goServer {
		return "go-server"
	}
	return "go-client"
}

// TestGoRping: rdma-core's rping over siw against iwarp-peer rping, both
// ways, 100 verified iterations at 64, 4096 and 65535 bytes, with CRC off
// (siw's default) and on (the Go side asks for it as initiator, or turns
// it on as responder). Every capture decodes.
func TestGoRping(t *testing.T) {
	for _, goServer := range []bool{false, true} {
		for _, crc := range []bool{false, true} {
			for _, size := range []int{64, 4096, 65535} {
				name := fmt.Sprintf("%s/crc-%s/%d", roleName(goServer), onOff(crc), size)
				t.Run(name, func(t *testing.T) {
					ctx := scenario(t, 4*time.Minute)
					flags, crcDesc := "--crc off", "off (siw's default)"
					switch {
					case crc && goServer:
						flags, crcDesc = "--crc preferred", "on (Go responder sets C)"
					case crc:
						flags, crcDesc = "--crc required", "on (Go initiator asks)"
					}
					ini, resp := roles(goServer)
					record(t, matrixRow{Scenario: "rping", Initiator: ini, Responder: resp, CRC: crcDesc, MPA: "rev 2 enhanced, IRD/ORD 1/1",
						Checks: fmt.Sprintf("-C 100 -V at %d bytes, capture decodes", size)})
					r := rpingHostGuest(t, ctx, goServer, 100, size, flags, "rping-"+strings.ReplaceAll(name, "/", "-"))
					requireRpingOK(t, r, 100)
					want := "CRC off"
					if crc {
						want = "CRC32c on"
					}
					assert.Contains(t, goSetup(t, r), want)
					w := requireDecodes(t, r.pcap, crc)
					assert.Equal(t, 2, w.Request.Rev)
					assert.True(t, w.Request.Enhanced)
				})
			}
		}
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// TestGoRpingSiwCRCRequired: siw built with mpa_crc_required=1 (the knobs
// module). As initiator siw asks for CRC and the Go responder follows; as
// responder siw takes a Go Request with C. rping at all three sizes.
func TestGoRpingSiwCRCRequired(t *testing.T) {
	ctx := scenario(t, 10*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_crc_required=1")
	for _, goServer := range []bool{false, true} {
		for _, size := range []int{64, 4096, 65535} {
			name := fmt.Sprintf("%s/%d", roleName(goServer), size)
			t.Run(name, func(t *testing.T) {
				ctx := scenario(t, 4*time.Minute)
				flags, crcDesc := "--crc required", "on (Go asks; siw mpa_crc_required=1)"
				if goServer {
					flags, crcDesc = "--crc off", "on (siw mpa_crc_required=1 asks, Go follows)"
				}
				ini, resp := roles(goServer)
				record(t, matrixRow{Scenario: "rping", Initiator: ini, Responder: resp, CRC: crcDesc, MPA: "rev 2 enhanced; siw knobs",
					Checks: fmt.Sprintf("-C 100 -V at %d bytes, capture decodes", size)})
				r := rpingHostGuest(t, ctx, goServer, 100, size, flags, "rping-crcreq-"+strings.ReplaceAll(name, "/", "-"))
				requireRpingOK(t, r, 100)
				assert.Contains(t, goSetup(t, r), "CRC32c on")
				w := requireDecodes(t, r.pcap, true)
				assert.True(t, w.Request.C, "the Request asks for CRC")
			})
		}
	}
}

// TestGoConnectStorm: siw's responder race. siw's accept sends the MPA
// Reply before it hooks the socket to the QP, and an FPDU that arrives in
// between sits unprocessed (siw-lab-notes "Quirks" 2). iwarp-go holds an
// initiator's first FPDU back toward peers that are not iwarp-go
// (conn.WithFirstFPDUDelay, 300 ms by default). 25 connections in a row
// from iwarp-peer rping -c -C 1 (no peer-to-peer, so the first FPDU is a
// Send) to a persistent rping server in the guest, each within 20 s.
func TestGoConnectStorm(t *testing.T) {
	const n = 25
	ctx := scenario(t, 5*time.Minute)
	record(t, matrixRow{Scenario: "connect storm (responder race)", Initiator: goName, Responder: siwName, CRC: "off",
		MPA: "rev 2 enhanced, no P2P; first FPDU held back", Checks: fmt.Sprintf("%d consecutive connects, -C 1 -V, 20 s each", n)})
	srv := server(t, ctx, "rping-s-persistent", fmt.Sprintf("exec rping -s -a %s -p %d -P -v", guestIP, rpingPort), rpingPort)
	host, port := guestPortAddr(t, rpingPort)
	var took []time.Duration
	for i := range n {
		r := runHost(t, ctx, 20*time.Second, fmt.Sprintf("rping-c-%02d", i), "rping", "-c", "-a", host, "-p", port, "-C", "1", "-S", "64", "-v", "-V")
		require.True(t, r.OK(), "connect %d of %d: %s", i+1, n, r)
		require.Len(t, pingLine.FindAllString(r.Stdout, -1), 1, "connect %d: %s", i+1, r)
		took = append(took, r.Wall)
	}
	t.Logf("%d connects, each: %v", n, took)
	// Each client validated (-V) the data the server read from it and
	// wrote back, so every connection worked both ways. (The persistent
	// server's own -v lines sit in its stdio buffer until it exits.)
	require.False(t, srv.Exited(), "the persistent server is still serving: %s", srv.Stderr())
}
