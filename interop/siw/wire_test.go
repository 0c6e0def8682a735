//go:build interop

package siw_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// sideOf names the iwtest side that sent from a TCP port.
func sideOf(port string) string {
	if port == fmt.Sprint(iwtestPort) {
		return "server"
	}
	return "client"
}

// stagString normalises an STag printed in decimal or 0x-hex.
func stagString(t *testing.T, s string) string {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 32)
	require.NoError(t, err)
	return fmt.Sprintf("0x%08x", v)
}

// capture starts a guest tcpdump for the test; stop returns the host path.
func capture(t *testing.T, ctx context.Context, name, iface, filter string) (stop func() string) {
	t.Helper()
	c, err := vm.StartCapture(ctx, name, iface, filter, 0)
	require.NoError(t, err)
	return func() string {
		t.Helper()
		path, err := c.Stop(ctx)
		require.NoError(t, err)
		return path
	}
}

// pdu is one RDMAP message in a capture: the TCP source port of its frame,
// its opcode and one more field (empty unless asked for).
type pdu struct{ src, op, extra string }

// rdmapPDUs lists the RDMAP messages tshark finds, several per frame where
// TCP carried several FPDUs in one segment. extra, if not empty, names a
// field that every matched message carries (use filter to match only
// those).
func rdmapPDUs(t *testing.T, pcap, filter, extra string) []pdu {
	t.Helper()
	args := []string{"-Y", filter, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "tcp.srcport", "-e", "iwarp_rdma.opcode"}
	if extra != "" {
		args = append(args, "-e", extra)
	}
	var pdus []pdu
	for _, line := range strings.Split(strings.TrimSpace(tshark(t, pcap, args...)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			continue
		}
		ops := strings.Split(f[1], ",")
		var ex []string
		if extra != "" {
			require.Len(t, f, 3, line)
			ex = strings.Split(f[2], ",")
			require.Len(t, ex, len(ops), "one %s per message: %s", extra, line)
		}
		for i, op := range ops {
			p := pdu{src: f[0], op: op}
			if ex != nil {
				p.extra = ex[i]
			}
			pdus = append(pdus, p)
		}
	}
	return pdus
}

// TestCaptureRpingDecodes: a capture of rping on lo (siw↔siw traffic to
// 10.0.2.15 is routed over lo) decodes in tshark as MPA with the Send, Read
// Request, Read Response and Write that rping uses.
func TestCaptureRpingDecodes(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	stop := capture(t, ctx, "rping-lo", "lo", "tcp port 7174")
	rpingPair(t, ctx, 10)
	pcap := stop()
	requireDecodes(t, pcap, false)
	out := tshark(t, pcap)
	for _, want := range []string{"MPA Request Frame", "MPA Reply Frame", "Send", "Read Request", "Read Response", "Write"} {
		assert.Contains(t, out, want)
	}
	ops := map[string]int{}
	for _, p := range rdmapPDUs(t, pcap, "iwarp_rdma.opcode", "") {
		ops[p.op]++
	}
	// 10 iterations of: two 16-byte Sends per side, one Read (Request and
	// a one-FPDU Response on lo), one Write.
	assert.Equal(t, map[string]int{"0x03": 40, "0x01": 10, "0x02": 10, "0x00": 10}, ops)
}

// TestWireSolicitedAndInvalidate: the Send with Solicited Event and Send
// with Invalidate tests of iwtest put opcodes 5 and 4 on the wire in both
// directions, the latter naming the STag the receiver advertised. The C
// receiver cannot see the SE bit itself on siw (see PROTOCOL.md), so the
// wire is the proof.
func TestWireSolicitedAndInvalidate(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	stop := capture(t, ctx, "se-inv", "lo", fmt.Sprintf("tcp port %d", iwtestPort))
	srv, cli, sout, cout := iwtestPair(t, ctx, "-S 4k", "-T send_se,send_inv -S 64", 2*time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	conntest.RequireAllOK(t, cout, []string{"send_se", "send_inv"}, []string{"64"})
	pcap := stop()
	requireDecodes(t, pcap, false)
	// The STags the receivers advertised for invalidation, by receiver.
	advertised := map[string]bool{}
	for _, side := range []struct{ name, out string }{{"server", sout}, {"client", cout}} {
		rows := conntest.Lines(side.out, "INVALIDATE")
		require.Len(t, rows, 1, side.out)
		advertised[side.name+" "+stagString(t, rows[0]["stag"])] = true
	}
	seen := map[string]bool{}
	for _, p := range rdmapPDUs(t, pcap, "iwarp_rdma.opcode", "") {
		seen[sideOf(p.src)+" "+p.op] = true
	}
	invalidated := map[string]bool{}
	for _, p := range rdmapPDUs(t, pcap, "iwarp_rdma.opcode == 0x04", "iwarp_rdma.inval_stag") {
		require.Equal(t, "0x04", p.op)
		receiver := "server"
		if sideOf(p.src) == "server" {
			receiver = "client"
		}
		invalidated[receiver+" "+stagString(t, p.extra)] = true
	}
	for _, want := range []string{"client 0x05", "server 0x05", "client 0x04", "server 0x04"} {
		assert.True(t, seen[want], "no %s frame; seen %v", want, seen)
	}
	assert.Equal(t, advertised, invalidated, "each Send with Invalidate names the STag its receiver advertised")
}

// TestTerminateProvoked: iwtest advertises a bad RDMA Write sink (no remote
// write access; an address past the end of the region); siw on that side
// answers the peer's Write with a Terminate (opcode 7) and both sides see
// the connection fail.
func TestTerminateProvoked(t *testing.T) {
	for _, mode := range []string{"access", "bounds"} {
		t.Run(mode, func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			stop := capture(t, ctx, "terminate-"+mode, "lo", fmt.Sprintf("tcp port %d", iwtestPort))
			srv, cli, sout, cout := iwtestPair(t, ctx, "-S 4k --provoke "+mode, "-T write -D c2s -S 4k --expect-error -t 20", 2*time.Minute)
			require.Equal(t, "0", srv["code"], sout)
			require.Equal(t, "0", cli["code"], cout)
			require.Len(t, conntest.Lines(sout, "TERMINATED"), 1, sout)
			pcap := stop()
			w := requireDecodes(t, pcap, false)
			assert.Equal(t, 1, w.ops[w.fromResponder()+" Terminate"], "%v", w.ops)
			terms := rdmapPDUs(t, pcap, "iwarp_rdma.opcode == 0x07", "")
			require.NotEmpty(t, terms, "no Terminate in the capture")
			// The Terminate comes from the side that owns the bad sink.
			for _, p := range terms {
				assert.Equal(t, "server", sideOf(p.src), terms)
			}
		})
	}
}

// TestVariantPeerToPeer: the knobs build with peer_to_peer=1 makes siw
// request RFC 6581 P2P with Write and Read RTR offered, the responder picks
// the Write RTR, and the initiator's first FPDU is the zero-length RDMA
// Write to STag 1; rping still passes.
func TestVariantPeerToPeer(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "peer_to_peer=1")
	stop := capture(t, ctx, "rping-p2p", "lo", "tcp port 7174")
	rpingPair(t, ctx, 10)
	pcap := stop()
	requireDecodes(t, pcap, false)
	req := tshark(t, pcap, "-Y", "iwarp_mpa.req", "-T", "fields", "-e", "iwarp_mpa.rev", "-e", "iwarp_mpa.privatedata")
	assert.Contains(t, req, "2\t8001c001", "MPA Request: P2P bit in IRD, Write+Read RTR in ORD")
	rep := tshark(t, pcap, "-Y", "iwarp_mpa.rep", "-T", "fields", "-e", "iwarp_mpa.privatedata")
	assert.Contains(t, rep, "80018001", "MPA Reply: P2P echoed, Write RTR chosen")
	first := tshark(t, pcap, "-Y", "iwarp_rdma.opcode", "-c", "400", "-T", "fields", "-E", "occurrence=f",
		"-e", "iwarp_rdma.opcode", "-e", "iwarp_ddp.stag", "-e", "iwarp_mpa.ulpdulength")
	lines := strings.Split(strings.TrimSpace(first), "\n")
	require.NotEmpty(t, lines)
	assert.Equal(t, "0x00\t0x00000001\t14", lines[0], "the RTR")
}

// TestVariantCRCRequired: with mpa_crc_required=1 the initiator sets C,
// the responder follows, and every FPDU carries a CRC32c tshark accepts.
func TestVariantCRCRequired(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_crc_required=1")
	stop := capture(t, ctx, "crc", "lo", fmt.Sprintf("tcp port %d", iwtestPort))
	srv, cli, sout, cout := iwtestPair(t, ctx, "-S 64k", "-T write,read,send -S 1,65536", 2*time.Minute)
	require.Equal(t, "0", cli["code"], cout)
	require.Equal(t, "0", srv["code"], sout)
	pcap := stop()
	requireDecodes(t, pcap, true)
	flags := tshark(t, pcap, "-Y", "iwarp_mpa.req || iwarp_mpa.rep", "-T", "fields", "-e", "iwarp_mpa.crc_flag")
	assert.Equal(t, "1\n1\n", strings.ReplaceAll(flags, "True", "1"))
	v := tshark(t, pcap, "-V")
	good := strings.Count(v, "(Good CRC32)")
	assert.Greater(t, good, 20, "FPDUs with a good CRC")
	assert.NotContains(t, v, "Bad CRC32")
}

// TestVariantRev1Read: the knobs build with mpa_version=1 makes siw's
// initiator use MPA revision 1, which carries no IRD/ORD. siw then takes
// IRD/ORD from the rdma_cm parameters, so RDMA Reads work only when both
// sides pass them explicitly; with 0/0 the server cannot read.
func TestVariantRev1Read(t *testing.T) {
	ctx := scenario(t, 4*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_version=1")
	t.Run("explicit-ird-ord", func(t *testing.T) {
		ctx := scenario(t, 3*time.Minute)
		stop := capture(t, ctx, "rev1-read", "lo", fmt.Sprintf("tcp port %d", iwtestPort))
		srv, cli, sout, cout := iwtestPair(t, ctx, "-S 64k --ird 4 --ord 4", "-T read -S 4096,65536 --ird 4 --ord 4", 2*time.Minute)
		require.Equal(t, "0", cli["code"], cout)
		require.Equal(t, "0", srv["code"], sout)
		conntest.RequireAllOK(t, cout, []string{"read"}, []string{"4096", "65536"})
		pcap := stop()
		requireDecodes(t, pcap, false)
		rev := tshark(t, pcap, "-Y", "iwarp_mpa.req || iwarp_mpa.rep", "-T", "fields", "-e", "iwarp_mpa.rev", "-e", "iwarp_mpa.pdlength")
		assert.Equal(t, "1\t0\n1\t0\n", rev)
	})
	t.Run("zero-ird-ord", func(t *testing.T) {
		ctx := scenario(t, 3*time.Minute)
		srv, cli, sout, cout := iwtestPair(t, ctx, "-S 4k --ird 0 --ord 0 --expect-error -t 20", "-T read -D c2s -S 4096 --expect-error -t 20", 2*time.Minute)
		require.Equal(t, "0", srv["code"], sout)
		require.Equal(t, "0", cli["code"], cout)
		rows := conntest.Lines(sout, "RESULT")
		require.Len(t, rows, 1, sout)
		assert.Equal(t, "op_error", rows[0]["status"], sout)
	})
}
