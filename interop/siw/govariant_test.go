//go:build interop

package siw_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// MPA variants between iwarp-go and siw, each with the outcome it must
// show.

// TestGoVariantSiwRev1: siw as initiator with mpa_version=1 (knobs) sends a
// revision 1 Request; the Go responder answers in revision 1 (no IRD/ORD
// exchange, its IRD and the peer's from options) and rping completes,
// Reads included.
func TestGoVariantSiwRev1(t *testing.T) {
	ctx := scenario(t, 4*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_version=1")
	record(t, matrixRow{Scenario: "MPA rev 1 from siw", Initiator: siwName, Responder: goName, CRC: "off",
		MPA: "rev 1 (siw knobs mpa_version=1)", Checks: "rping -C 20 -V at 4096 bytes; Request and Reply rev 1"})
	r := rpingHostGuest(t, ctx, true, 20, 4096, "", "siw-rev1")
	requireRpingOK(t, r, 20)
	assert.Contains(t, goSetup(t, r), "MPA rev 1")
	w := requireDecodes(t, r.pcap, false)
	assert.Equal(t, 1, w.Request.Rev)
	assert.Equal(t, 1, w.Reply.Rev)
	assert.Nil(t, w.Reply.IRDORD, "no IRD/ORD block in revision 1")
	assert.Positive(t, w.ops[w.fromResponder()+" RDMA Read Request"], "the Go server reads: %v", w.ops)
}

// TestGoVariantGoRev1: iwarp-go as initiator with MPA revision 1. siw
// accepts, but without an IRD/ORD exchange its passive side takes IRD and
// ORD from its application's connection parameters. iwtest passes them
// (--ird/--ord): Reads work both ways. With 0/0 siw cannot answer the Go
// side's Read: it sends a Terminate (RDMAP, remote operation, catastrophic
// stream) that the Go side reports in siw's layout.
func TestGoVariantGoRev1(t *testing.T) {
	t.Run("explicit-ird-ord", func(t *testing.T) {
		ctx := scenario(t, 3*time.Minute)
		record(t, matrixRow{Scenario: "MPA rev 1 from iwarp-go", Initiator: goName, Responder: siwName, CRC: "off",
			MPA: "rev 1; siw app IRD/ORD 4/4", Checks: "Reads both ways at 4 KiB and 64 KiB"})
		p := iwtestHostGuest(t, ctx, false, "--mpa-rev 1 --crc off --peer-ird 4 -T read -S 4096,65536", "-S 64k --ird 4 --ord 4",
			2*time.Minute, "go-rev1")
		require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
		require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
		conntest.RequireAllOK(t, p.goOut(), []string{"read"}, []string{"4096", "65536"})
		conntest.RequireAllOK(t, p.cOut(), []string{"read"}, []string{"4096", "65536"})
		e := conntest.Lines(p.goOut(), "ESTABLISHED")
		require.Len(t, e, 1)
		assert.Equal(t, "1", e[0]["mpa_rev"])
		assert.Equal(t, "4", e[0]["ord"], "the Go side's ORD is the peer IRD it was told")
		w := requireDecodes(t, p.pcap, false)
		assert.Equal(t, 1, w.Request.Rev)
		assert.Equal(t, 1, w.Reply.Rev, "siw echoes the revision")
	})
	t.Run("zero-ird-ord", func(t *testing.T) {
		ctx := scenario(t, 3*time.Minute)
		record(t, matrixRow{Scenario: "MPA rev 1 from iwarp-go", Initiator: goName, Responder: siwName, CRC: "off",
			MPA: "rev 1; siw app IRD/ORD 0/0", Checks: "Go's Read fails: Terminate 0/2/0x07 in siw's layout"})
		p := iwtestHostGuest(t, ctx, false, "--mpa-rev 1 --crc off -T read -D s2c -S 4096 --expect-error -t 20",
			"-S 4k --ird 0 --ord 0 --expect-error -t 20", 2*time.Minute, "go-rev1-zero")
		require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
		require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
		term := conntest.Lines(p.goOut(), "TERMINATE")
		require.Len(t, term, 1, p.goOut())
		assert.Equal(t, "remote", term[0]["origin"])
		assert.Equal(t, "0x0207", term[0]["code"], "RDMAP remote operation error, catastrophic stream")
		assert.Equal(t, "siw", term[0]["layout"])
		w := requireDecodes(t, p.pcap, false)
		assert.Equal(t, 1, w.ops[w.fromResponder()+" Terminate"], "%v", w.ops)
	})
}

// TestGoVariantSiwP2P: siw as initiator with peer_to_peer=1 (knobs) offers
// the Write and the Read RTR. A Go responder that allows only Write picks
// Write, one that allows only Read picks Read; siw sends that RTR first
// (a zero-length Write to STag 1, or a zero-length Read Request) and rping
// completes either way.
func TestGoVariantSiwP2P(t *testing.T) {
	ctx := scenario(t, 6*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "peer_to_peer=1")
	for _, rtr := range []string{"write", "read"} {
		t.Run(rtr, func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			record(t, matrixRow{Scenario: "P2P from siw", Initiator: siwName, Responder: goName, CRC: "off",
				MPA: "rev 2 P2P, siw offers Write+Read, Go allows " + rtr, Checks: "RTR chosen and sent first; rping -C 20 -V"})
			r := rpingHostGuest(t, ctx, true, 20, 4096, "--p2p "+rtr, "siw-p2p-"+rtr)
			requireRpingOK(t, r, 20)
			assert.Contains(t, goSetup(t, r), "peer-to-peer with "+map[string]string{"write": "Write", "read": "Read"}[rtr]+" RTR")
			w := requireDecodes(t, r.pcap, false)
			require.NotNil(t, w.Request.IRDORD)
			assert.True(t, w.Request.IRDORD.P2P)
			assert.Equal(t, "write|read", strings.ToLower(w.Request.IRDORD.RTR), "siw offers both")
			require.NotNil(t, w.Reply.IRDORD)
			assert.True(t, w.Reply.IRDORD.P2P)
			assert.Equal(t, rtr, strings.ToLower(w.Reply.IRDORD.RTR), "the Go responder's choice")
			first := w.firstFPDU(w.fromInitiator())
			require.NotNil(t, first)
			switch rtr {
			case "write":
				assert.Equal(t, "RDMA Write", first.Op)
				assert.Zero(t, first.PayloadLen)
				require.NotNil(t, first.STag)
				assert.Equal(t, "0x00000001", *first.STag, "siw's Write RTR names STag 1")
			case "read":
				assert.Equal(t, "RDMA Read Request", first.Op)
				require.NotNil(t, first.ReadRequest)
				assert.Zero(t, first.ReadRequest.Size)
				resp := w.firstFPDU(w.fromResponder())
				require.NotNil(t, resp)
				assert.Equal(t, "RDMA Read Response", resp.Op, "the Go side answers the Read RTR first")
				assert.Zero(t, resp.PayloadLen)
			}
		})
	}
}

// TestGoVariantGoP2P: iwarp-go as initiator asks for peer-to-peer mode
// from a stock siw responder. Offered Write and Read, siw picks Write;
// offered only Read, siw answers the Read RTR with a zero-length Read
// Response. iwtest sessions run over both.
func TestGoVariantGoP2P(t *testing.T) {
	for _, c := range []struct{ offer, want string }{{"write,read", "write"}, {"read", "read"}} {
		t.Run(strings.ReplaceAll(c.offer, ",", "+"), func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			record(t, matrixRow{Scenario: "P2P from iwarp-go", Initiator: goName, Responder: siwName, CRC: "off",
				MPA: "rev 2 P2P, Go offers " + c.offer, Checks: "siw picks " + c.want + "; RTR first; Send, Read, Write both ways"})
			p := iwtestHostGuest(t, ctx, false, "--crc off --p2p "+c.offer+" -T send,read,write -S 4096", "-S 4k", 2*time.Minute,
				"go-p2p-"+c.want)
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
			conntest.RequireAllOK(t, p.goOut(), []string{"send", "read", "write"}, []string{"4096"})
			e := conntest.Lines(p.goOut(), "ESTABLISHED")
			require.Len(t, e, 1)
			assert.Equal(t, c.want, e[0]["p2p"])
			w := requireDecodes(t, p.pcap, false)
			require.NotNil(t, w.Reply.IRDORD)
			assert.True(t, w.Reply.IRDORD.P2P, "siw acknowledges P2P")
			assert.Equal(t, c.want, strings.ToLower(w.Reply.IRDORD.RTR))
			first := w.firstFPDU(w.fromInitiator())
			require.NotNil(t, first)
			if c.want == "write" {
				assert.Equal(t, "RDMA Write", first.Op)
				assert.Zero(t, first.PayloadLen)
			} else {
				assert.Equal(t, "RDMA Read Request", first.Op)
				require.NotNil(t, first.ReadRequest)
				assert.Zero(t, first.ReadRequest.Size)
				resp := w.firstFPDU(w.fromResponder())
				require.NotNil(t, resp)
				assert.Equal(t, "RDMA Read Response", resp.Op, "siw answers the Read RTR")
				assert.Zero(t, resp.PayloadLen)
			}
		})
	}
}

// TestGoVariantCRCRequiredPassive: siw built with mpa_crc_required=1 as the
// passive side still accepts a Request without C, and the connection runs
// without CRC: siw_proc_mpareq applies the parameter only to Requests
// that carry C.
func TestGoVariantCRCRequiredPassive(t *testing.T) {
	ctx := scenario(t, 4*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_crc_required=1")
	record(t, matrixRow{Scenario: "CRC: Go without C", Initiator: goName, Responder: siwName, CRC: "off (accepted)",
		MPA: "rev 2; siw knobs mpa_crc_required=1", Checks: "siw accepts without CRC; Send, Read, Write"})
	p := iwtestHostGuest(t, ctx, false, "--crc off -T send,read,write -S 4096", "-S 4k", 2*time.Minute, "crcreq-no-c")
	require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
	require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
	e := conntest.Lines(p.goOut(), "ESTABLISHED")
	require.Len(t, e, 1)
	assert.Equal(t, "off", e[0]["crc"])
	w := requireDecodes(t, p.pcap, false)
	assert.False(t, w.Request.C)
	assert.False(t, w.Reply.C, "no CRC although siw requires it for itself")
}

// TestGoVariantCRCStrict: siw built with mpa_crc_strict=1 (and CRC not
// required) rejects a Request that asks for CRC. The Go initiator reports
// a clean rejection: an MPA Reply with the R bit, nothing else.
func TestGoVariantCRCStrict(t *testing.T) {
	ctx := scenario(t, 4*time.Minute)
	withSiw(t, ctx, lab.SiwKnobs, "mpa_crc_strict=1")
	record(t, matrixRow{Scenario: "CRC: siw strict", Initiator: goName, Responder: siwName, CRC: "asked, refused",
		MPA: "rev 2; siw knobs mpa_crc_strict=1", Checks: "Go sees an MPA reject (R bit), exits cleanly"})
	stop := captureEth0(t, ctx, "crc-strict", iwtestPort)
	srv := server(t, ctx, "iwtest-s", fmt.Sprintf("exec iwtest -s -a %s -p %d -w 60", guestIP, iwtestPort), iwtestPort)
	host, port := guestPortAddr(t, iwtestPort)
	g := runHost(t, ctx, time.Minute, "iwtest-c", "iwtest", "-c", "-a", host, "-p", port, "--crc", "preferred", "--expect-reject")
	require.True(t, g.OK(), "%s", g)
	rej := conntest.Lines(g.Stdout, "REJECT")
	require.Len(t, rej, 1, "%s", g)
	assert.Equal(t, "0", rej[0]["private_data_len"])
	// siw refused the connection inside the kernel: its application never
	// saw a request (and would wait for one until -w runs out).
	sres, err := srv.Stop(ctx, 2*time.Second)
	require.NoError(t, err)
	assert.Empty(t, conntest.Lines(sres.Stdout, "CONNECT"), "%s", sres)
	pcap := stop()
	d := decodeCapture(t, pcap)
	require.Len(t, d.Streams, 1)
	s := d.Streams[0]
	assert.Equal(t, "rejected", s.State)
	require.NotNil(t, s.Request)
	assert.True(t, s.Request.C, "the Request asks for CRC")
	require.NotNil(t, s.Reply)
	assert.True(t, s.Reply.R, "the Reply rejects")
	assert.False(t, s.Reply.C, "strict siw clears C in its reject")
	assert.Empty(t, s.PDUs)
}
