//go:build interop

package siw_test

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/internal/conntest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireGoChecks checks what only the Go side can see: every Send with
// Solicited Event it received carried the SE bit, and every Send with
// Invalidate it received invalidated exactly the STag it advertised.
func requireGoChecks(t *testing.T, out string, sePhases, invPhases int) {
	t.Helper()
	sol := conntest.Lines(out, "SOLICITED")
	require.Len(t, sol, sePhases, out)
	for _, r := range sol {
		assert.Equal(t, "yes", r["event"], "%v", r)
	}
	inv := conntest.Lines(out, "INVALIDATE")
	require.Len(t, inv, invPhases, out)
	for _, r := range inv {
		assert.Equal(t, "yes", r["reported"], "%v", r)
	}
}

// TestGoIwtest: the C program in the guest against iwarp-peer iwtest on the
// host, as client and as server, with iwarp-go's default connection
// options (MPA rev 2 enhanced, CRC preferred, Write RTR as initiator):
// RDMA Write, Read, Send, Send with SE, Send with Invalidate of an STag the
// receiver registered, multi-SGE Send and Write, both directions, 1 B to
// 1 MiB. Both sides check every byte; the capture decodes with good CRCs.
func TestGoIwtest(t *testing.T) {
	sizes := []string{"1", "7", "4096", "65535", "1048576"}
	for _, goServer := range []bool{false, true} {
		name := "go-client"
		if goServer {
			name = "go-server"
		}
		t.Run(name, func(t *testing.T) {
			ctx := scenario(t, 6*time.Minute)
			ini, resp := roles(goServer)
			mpaVariant := "rev 2 enhanced, Write RTR"
			if goServer {
				mpaVariant = "rev 2 enhanced, no P2P"
			}
			record(t, matrixRow{Scenario: "iwtest, all operations", Initiator: ini, Responder: resp, CRC: "on (Go prefers)",
				MPA: mpaVariant, Checks: "7 tests × 2 directions × 1 B–1 MiB, data both sides, SE bit, invalidated STag, capture"})
			goArgs, cArgs := sides(goServer, "-S 1m", "-T all -S "+strings.Join(sizes, ","))
			p := iwtestHostGuest(t, ctx, goServer, goArgs, cArgs, 4*time.Minute, "iwtest-"+name)
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
			conntest.RequireAllOK(t, p.goOut(), allTests, sizes)
			conntest.RequireAllOK(t, p.cOut(), allTests, sizes)
			requireGoChecks(t, p.goOut(), len(sizes), len(sizes))
			est := conntest.Lines(p.goOut(), "ESTABLISHED")
			require.Len(t, est, 1)
			assert.Equal(t, "on", est[0]["crc"])
			assert.Equal(t, "2", est[0]["mpa_rev"])
			if !goServer {
				assert.Equal(t, "write", est[0]["p2p"], "siw picks the Write RTR")
			}
			w := requireDecodes(t, p.pcap, true)
			for _, op := range []string{"0x00", "0x01", "0x02", "0x03", "0x04", "0x05"} {
				assert.Positive(t, w.tsh.opcodes[op], "opcode %s on the wire: %v", op, w.tsh.opcodes)
			}
		})
	}
}

// sides returns the iwtest arguments of the Go side and of the C side
// for a session whose server gets srvArgs and client cliArgs (the client
// drives: the server takes its plan from the client's BEGIN messages).
func sides(goServer bool, srvArgs, cliArgs string) (goArgs, cArgs string) {
	if goServer {
		return srvArgs, cliArgs
	}
	return cliArgs, srvArgs
}

// TestGoIwtestLarge: 16 MiB RDMA Writes, Reads and Sends between iwarp-go
// and siw, both directions, iwarp-go as client and as server. No full
// capture (hundreds of megabytes through the guest's 9p share).
func TestGoIwtestLarge(t *testing.T) {
	for _, goServer := range []bool{false, true} {
		name := "go-client"
		if goServer {
			name = "go-server"
		}
		t.Run(name, func(t *testing.T) {
			ctx := scenario(t, 6*time.Minute)
			ini, resp := roles(goServer)
			record(t, matrixRow{Scenario: "iwtest, 16 MiB", Initiator: ini, Responder: resp, CRC: "on (Go prefers)",
				MPA: "rev 2 enhanced", Checks: "Write, Read, Send of 16 MiB, both directions"})
			goArgs, cArgs := sides(goServer, "-S 16m -t 120", "-T write,read,send -S 16m -t 120")
			var p *iwtPair
			for attempt := 0; ; attempt++ {
				run(t, ctx, 30*time.Second, fmt.Sprintf("dmesg-clear-%s-%d", name, attempt), "dmesg -c >/dev/null")
				p = iwtestHostGuest(t, ctx, goServer, goArgs, cArgs, 5*time.Minute, "")
				if p.goRes.OK() && p.cRes.OK() {
					break
				}
				// A siw bug (docs/interop.md, item 7), proven by its own
				// log, repeats the run, as for perftest; anything else
				// fails below.
				res := run(t, ctx, 30*time.Second, fmt.Sprintf("dmesg-%s-%d", name, attempt), "dmesg")
				errs := lab.ParseSiwCRCErrors(res.Stdout)
				if len(errs) == 0 {
					break
				}
				first, misread := errs[len(errs)-1].SplitField()
				if !misread {
					break
				}
				if attempt == siwMisreadRetries {
					t.Fatalf("siw misread a right CRC field split %d|%d across socket buffers in all %d attempts (a siw bug, docs/interop.md item 7); iwarp-go's FPDUs were right:\n%s\n%s",
						first, 4-first, attempt+1, p.goRes, p.cRes)
				}
				t.Logf("attempt %d: siw misread a CRC field that reached it split %d|%d across socket buffers, and ended the run:\n%s",
					attempt+1, first, 4-first, p.goRes)
			}
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
			conntest.RequireAllOK(t, p.goOut(), []string{"write", "read", "send"}, []string{"16777216"})
			conntest.RequireAllOK(t, p.cOut(), []string{"write", "read", "send"}, []string{"16777216"})
		})
	}
}

// TestGoRejectWithPrivateData: iwarp-go as responder rejects the C
// program's connection with private data; the C client sees the reject
// and the private data, and the Go side saw the client's. The reject is
// repeated: a responder that closes too early loses the private data only
// now and then (see rejectCloseBug; between none in ten and one in three,
// by load).
func TestGoRejectWithPrivateData(t *testing.T) {
	const tries = 20
	ctx := scenario(t, 5*time.Minute)
	record(t, matrixRow{Scenario: "reject with private data", Initiator: siwName, Responder: goName, CRC: "off",
		MPA: "rev 2 enhanced, R bit", Checks: fmt.Sprintf("C client sees REJECTED and the private data, %d times", tries)})
	lost := 0
	for i := range tries {
		capName := ""
		if i == 0 {
			capName = "reject"
		}
		p := iwtestHostGuest(t, ctx, true, "--reject -P go-says-no", "--expect-reject -P knock-knock", time.Minute, capName)
		require.True(t, p.goRes.OK(), "%s", p.goRes)
		require.True(t, p.cRes.OK(), "%s", p.cRes)
		rej := conntest.Lines(p.cOut(), "REJECT")
		require.Len(t, rej, 1, p.cOut())
		assert.Equal(t, "-104", rej[0]["status"], "rdma_cm reports the R bit as ECONNRESET")
		conn := conntest.Lines(p.goOut(), "CONNECT")
		require.Len(t, conn, 1)
		assert.Equal(t, "knock-knock", conn[0]["text"])
		if rej[0]["text"] != "go-says-no" {
			lost++
			t.Logf("try %d: the C client got the reject without its private data: %v", i+1, rej[0])
		}
		if i > 0 {
			continue
		}
		d := decodeCapture(t, p.pcap)
		require.Len(t, d.Streams, 1)
		s := d.Streams[0]
		assert.Equal(t, "rejected", s.State)
		require.NotNil(t, s.Reply)
		assert.True(t, s.Reply.R, "R bit set")
		assert.Equal(t, fmt.Sprintf("%x", "go-says-no"), s.Reply.AppData, "the reject frame carries the private data")
		assert.Empty(t, s.PDUs, "no FPDU after a reject")
		reply := tshark(t, p.pcap, "-Y", "iwarp_mpa.rep", "-T", "fields", "-e", "iwarp_mpa.rej_flag")
		assert.Regexp(t, `^(1|True)\n$`, reply, "tshark sees the R bit")
	}
	assert.Zero(t, lost, "%d of %d rejects reached the C program without their private data: %s", lost, tries, rejectCloseBug)
}

// rejectCloseBug says what a loss of a reject's private data has meant:
// docs/interop.md, "Problems found" 3.
const rejectCloseBug = "a siw initiator that sees the responder's FIN right behind the reject Reply can report the reject " +
	"without its private data; conn's ConnRequest.Reject must wait for the initiator to close"

// TestGoPrivateDataAndIRDORD: private data both ways between iwarp-go and
// siw, and the IRD/ORD each side advertises reach the other.
func TestGoPrivateDataAndIRDORD(t *testing.T) {
	for _, goServer := range []bool{false, true} {
		name := "go-client"
		if goServer {
			name = "go-server"
		}
		t.Run(name, func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			ini, resp := roles(goServer)
			record(t, matrixRow{Scenario: "private data, IRD/ORD", Initiator: ini, Responder: resp, CRC: "on (Go prefers)",
				MPA: "rev 2 enhanced", Checks: "private data both ways; IRD/ORD 8/2 → 2/8; Reads both ways"})
			goArgs, cArgs := sides(goServer, "-S 4k --ird 8 --ord 2", "-T read -S 4096 --ird 8 --ord 2")
			goArgs += " -P from-go"
			cArgs += " -P from-siw"
			p := iwtestHostGuest(t, ctx, goServer, goArgs, cArgs, 2*time.Minute, "pd-"+name)
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
			d := decodeCapture(t, p.pcap)
			require.Len(t, d.Streams, 1)
			t.Logf("MPA Request private data %s, Reply %s", d.Streams[0].Request.PrivateData, d.Streams[0].Reply.PrivateData)
			if goServer {
				c := conntest.Lines(p.goOut(), "CONNECT")
				require.Len(t, c, 1)
				assert.Equal(t, "from-siw", c[0]["text"])
				// siw's Request carries its IRD 8 / ORD 2; as rdma_cm would,
				// the Go server reads them as IRD 2 / ORD 8 asked of it.
				assert.Equal(t, "2", c[0]["ird"])
				assert.Equal(t, "8", c[0]["ord"])
				e := conntest.Lines(p.cOut(), "ESTABLISHED")
				require.Len(t, e, 1)
				assert.Equal(t, "from-go", e[0]["text"])
			} else {
				c := conntest.Lines(p.cOut(), "CONNECT")
				require.Len(t, c, 1)
				assert.Equal(t, "from-go", c[0]["text"], "%s", trailerBug)
				assert.Equal(t, "2", c[0]["ird"])
				assert.Equal(t, "8", c[0]["ord"])
				e := conntest.Lines(p.goOut(), "ESTABLISHED")
				require.Len(t, e, 1)
				assert.Equal(t, "from-siw", e[0]["text"])
			}
		})
	}
}

// TestGoTerminateFromSiw: iwtest in the guest advertises a bad RDMA Write
// sink (--provoke: an STag without remote write, or an address past the
// region's end); iwarp-go's Write makes siw send a Terminate, which the Go
// side decodes in siw's little-endian layout and reports: DDP tagged
// Invalid STag (siw maps missing rights there) and Base or bounds
// violation, with M and D set. The reverse direction (iwarp-go the sink)
// is TestGoTerminateToSiw.
func TestGoTerminateFromSiw(t *testing.T) {
	for _, c := range []struct {
		mode, code, control string
		goServer            bool
	}{
		{"access", "0x1100", "11000300", false},
		{"bounds", "0x1101", "11010300", false},
		{"access", "0x1100", "11000300", true},
	} {
		name := c.mode + "-go-client"
		if c.goServer {
			name = c.mode + "-go-server"
		}
		t.Run(name, func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			ini, resp := roles(c.goServer)
			record(t, matrixRow{Scenario: "Terminate from siw (" + c.mode + ")", Initiator: ini, Responder: resp, CRC: "off",
				MPA: "rev 2 enhanced", Checks: "TERMINATE code " + c.code + " read in siw's layout, M and D"})
			// The C side is the sink: the server in c2s, the client in s2c.
			dir := "c2s"
			if c.goServer {
				dir = "s2c"
			}
			goArgs, cArgs := sides(c.goServer, "-S 4k -t 20", "-T write -S 4096 -t 20 -D "+dir)
			goArgs += " --crc off --expect-error"
			cArgs += " --provoke " + c.mode
			p := iwtestHostGuest(t, ctx, c.goServer, goArgs, cArgs, 2*time.Minute, "terminate-"+name)
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
			require.Len(t, conntest.Lines(p.cOut(), "TERMINATED"), 1, p.cOut())
			term := conntest.Lines(p.goOut(), "TERMINATE")
			require.Len(t, term, 1, p.goOut())
			assert.Equal(t, "remote", term[0]["origin"])
			assert.Equal(t, c.code, term[0]["code"])
			assert.Equal(t, "siw", term[0]["layout"], "siw's bit-field order on x86")
			assert.Equal(t, c.control, term[0]["control"])
			assert.Equal(t, "1", term[0]["m"])
			assert.Equal(t, "1", term[0]["d"])
			w := requireDecodes(t, p.pcap, false)
			var terms []*decodedFPDU
			for _, f := range w.PDUs {
				if f.Terminate != nil {
					terms = append(terms, f)
				}
			}
			require.Len(t, terms, 1, "one Terminate on the wire")
			assert.Equal(t, c.control, terms[0].Terminate.Control)
			assert.Contains(t, terms[0].Terminate.Layout, "siw", "iwarp-peer decode reads siw's layout too")
		})
	}
}

// TestGoTerminateToSiw: iwarp-peer iwtest advertises the bad sink, siw's
// Write fails on it, iwarp-go sends a Terminate in the RFC layout, and the
// C program (run with --expect-error) sees its connection end. tshark
// reads the Terminate as the RFC says.
func TestGoTerminateToSiw(t *testing.T) {
	ctx := scenario(t, 3*time.Minute)
	record(t, matrixRow{Scenario: "Terminate to siw (bounds)", Initiator: siwName, Responder: goName, CRC: "off",
		MPA: "rev 2 enhanced", Checks: "Go sends 1/1/0x01 in RFC layout; siw's Write fails; tshark decodes it"})
	p := iwtestHostGuest(t, ctx, true, "-S 4k -t 20 --crc off --provoke bounds", "-T write -S 4096 -D c2s -t 20 --expect-error",
		2*time.Minute, "terminate-to-siw")
	require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
	require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
	require.Len(t, conntest.Lines(p.goOut(), "TERMINATED"), 1, p.goOut())
	sent := conntest.Lines(p.goOut(), "TERMINATE")
	require.Len(t, sent, 1, p.goOut())
	assert.Equal(t, "local", sent[0]["origin"])
	assert.Equal(t, "0x1101", sent[0]["code"])
	w := requireDecodes(t, p.pcap, false)
	var term *decodedFPDU
	for _, f := range w.PDUs {
		if f.Terminate != nil {
			require.Nil(t, term, "one Terminate")
			term = f
		}
	}
	require.NotNil(t, term, "the Terminate is on the wire")
	assert.Equal(t, w.fromResponder(), term.Dir, "sent by iwarp-go, the responder")
	assert.Equal(t, sent[0]["control"], term.Terminate.Control, "the bytes iwarp-go reports are the bytes on the wire")
	assert.Equal(t, "1101c000", term.Terminate.Control, "RFC layout: layer 1 type 1 code 1, M and D")
	got := tshark(t, p.pcap, "-Y", "iwarp_rdma.opcode == 0x07", "-T", "fields", "-e", "iwarp_rdma.term_layer",
		"-e", "iwarp_rdma.term_etype_ddp", "-e", "iwarp_rdma.term_errcode_ddp_tagged")
	assert.Regexp(t, `^(1|0x0*1)\t(1|0x0*1)\t(1|0x0*1)$`, strings.TrimSpace(got), "tshark: layer DDP, tagged buffer error, base or bounds")
}

// trailerBug says what a failure of the private-data checks has meant:
// docs/interop.md, "Problems found" 1 and 2.
const trailerBug = "the private data must arrive exactly as sent: iwarp-go's 8-byte peer trailer (\"iWGo\" 01 00 00 00, " +
	"conn/peer.go) must not reach a siw application; iwtest sends with conn.WithoutPeerTrailer"

// TestGoPrivateDataLimit: 251 bytes of private data, the most siw handles
// (its 8-bit length wraps above that once the 4-byte IRD/ORD block is
// added), reach the other side's application intact in both roles.
func TestGoPrivateDataLimit(t *testing.T) {
	pd := strings.Repeat("p", 251)
	for _, goServer := range []bool{false, true} {
		name := "go-client"
		if goServer {
			name = "go-server"
		}
		t.Run(name, func(t *testing.T) {
			ctx := scenario(t, 3*time.Minute)
			ini, resp := roles(goServer)
			record(t, matrixRow{Scenario: "private data of 251 bytes", Initiator: ini, Responder: resp, CRC: "on (Go prefers)",
				MPA: "rev 2 enhanced", Checks: "251 bytes arrive intact; the connection works"})
			goArgs, cArgs := sides(goServer, "-S 4k", "-T send -S 64")
			p := iwtestHostGuest(t, ctx, goServer, goArgs+" -P "+pd, cArgs+" -P "+pd, time.Minute, "pd251-"+name)
			// Whoever accepts prints CONNECT (the Request's data), whoever
			// connects ESTABLISHED (the Reply's).
			reqSide, repSide := p.cOut(), p.goOut()
			if goServer {
				reqSide, repSide = p.goOut(), p.cOut()
			}
			c := conntest.Lines(reqSide, "CONNECT")
			require.Len(t, c, 1, "the responder's application saw no connection request (%s): %s\n%s", trailerBug, p.goRes, p.cRes)
			assert.Equal(t, "251", c[0]["private_data_len"], trailerBug)
			assert.Equal(t, pd, c[0]["text"], trailerBug)
			e := conntest.Lines(repSide, "ESTABLISHED")
			require.Len(t, e, 1, "%s\n%s", p.goRes, p.cRes)
			assert.Equal(t, "251", e[0]["private_data_len"])
			assert.Equal(t, pd, e[0]["text"])
			require.True(t, p.goRes.OK(), "%s\n%s", p.goRes, p.cRes)
			require.True(t, p.cRes.OK(), "%s\n%s", p.cRes, p.goRes)
		})
	}
}
