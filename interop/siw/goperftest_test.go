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

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// perftest (Debian 12's 4.5+0.17, version 6.06) over siw in the guest
// against iwarp-peer perftest on the host, both roles.

const perftestPort = 18515

// ptCase is one perftest run between the host and the guest.
type ptCase struct {
	test     string // write_bw, …
	goServer bool
	crc      bool
	size     int
	iters    int
	all      bool   // -a
	capture  string // a full capture of the run on eth0, "" for none
}

func (c ptCase) lat() bool { return strings.HasSuffix(c.test, "_lat") }

// opts are the options both programs get.
func (c ptCase) opts() string {
	if c.all {
		return fmt.Sprintf("-a -n %d", c.iters)
	}
	return fmt.Sprintf("-s %d -n %d", c.size, c.iters)
}

// ptSide is what one program of a run printed.
type ptSide struct {
	code           int
	stdout, stderr string
	rows           []ptRow
}

func (s *ptSide) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", s.code, tail(s.stdout, 60), tail(s.stderr, 30))
}

// ptRow is a row of perftest's result table: size, iterations and the
// rest of the columns as printed.
type ptRow struct {
	size, iters uint64
	cols        []string
}

// parseRows finds the result rows: lines that start with two integers
// after the column names.
func parseRows(out string) []ptRow {
	var rows []ptRow
	table := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, " #bytes") {
			table = true
			continue
		}
		f := strings.Fields(line)
		if !table || len(f) < 4 {
			continue
		}
		size, err1 := strconv.ParseUint(f[0], 10, 64)
		iters, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			rows = append(rows, ptRow{size: size, iters: iters, cols: f[2:]})
		}
	}
	return rows
}

// calibrationFailed reports whether perftest's CPU-clock calibration
// spoiled the run: it printed its r^2 complaint and then failed, printed
// no row, or printed inf/nan.
// siwSplitCRC reports whether a failed CRC run ended because siw misread
// a right CRC field that reached it in two socket buffers (docs/interop.md,
// item 7; dissect.SiwTrailer): the guest's kernel log since the run began
// holds siw's CRC error, and its two numbers are the field's octets moved
// the way siw moves them. It returns how many octets the first buffer held.
func siwSplitCRC(t *testing.T, ctx context.Context, c ptCase, goSide, siwSide *ptSide, name string) (first int, ok bool) {
	t.Helper()
	if !c.crc || (goSide.code == 0 && siwSide.code == 0) {
		return 0, false
	}
	res := run(t, ctx, 30*time.Second, "dmesg-"+name, "dmesg")
	errs := lab.ParseSiwCRCErrors(res.Stdout)
	if len(errs) == 0 {
		return 0, false
	}
	return errs[len(errs)-1].SplitField()
}

func (s *ptSide) calibrationFailed() bool {
	if !strings.Contains(s.stderr, "r^2") {
		return false
	}
	if s.code != 0 || len(s.rows) == 0 {
		return true
	}
	for _, r := range s.rows {
		for _, c := range r.cols {
			if strings.Contains(c, "inf") || strings.Contains(c, "nan") {
				return true
			}
		}
	}
	return false
}

// runPerftestOnce runs c once: iwarp-peer perftest on the host, the
// perftest program in the guest.
func runPerftestOnce(t *testing.T, ctx context.Context, c ptCase, attempt int) (goSide, siwSide *ptSide, pcap string) {
	t.Helper()
	crc := "off"
	if c.crc {
		crc = "required" // the Go client asks; siw's server follows
		if c.goServer {
			crc = "preferred" // the Go server sets C; siw's client follows
		}
	}
	prog := "ib_" + c.test
	// siw's kernel log of this run alone tells why a CRC run failed
	// (siwSplitCRC).
	clearLog := ""
	if c.crc {
		clearLog = "dmesg -c >/dev/null; "
	}
	name := fmt.Sprintf("%s-%d", c.test, attempt)
	timeout := 3 * time.Minute
	var stop func() string
	if c.goServer {
		// -p 0: the server picks a free port and prints it.
		hp := startHost(t, ctx, "pt-s-"+name, append([]string{"perftest", c.test, "-j", "127.0.0.1", "-p", "0",
			"--crc", crc}, strings.Fields(c.opts())...)...)
		m := listeningPort.FindStringSubmatch(hp.waitOutput(t, 30*time.Second, "Waiting for client to connect"))
		require.NotNil(t, m, "iwarp-peer perftest prints its port")
		port, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if c.capture != "" {
			stop = captureEth0(t, ctx, c.capture, port)
		}
		res := run(t, ctx, timeout, "pt-c-"+name, primeNeighbour+clearLog+fmt.Sprintf("exec %s -R %s -p %d %s", prog, c.opts(), port, hostIP))
		siwSide = &ptSide{code: res.Code, stdout: res.Stdout, stderr: res.Stderr}
		g := hp.waitOrKill(t, time.Minute)
		goSide = &ptSide{code: g.Code, stdout: g.Stdout, stderr: g.Stderr}
	} else {
		if c.capture != "" {
			stop = captureEth0(t, ctx, c.capture, perftestPort)
		}
		srv := server(t, ctx, "pt-s-"+name, clearLog+fmt.Sprintf("exec %s -R %s -p %d", prog, c.opts(), perftestPort), perftestPort)
		host, port := guestPortAddr(t, perftestPort)
		g := runHost(t, ctx, timeout, "pt-c-"+name, append([]string{"perftest", c.test, host, "-p", port, "--crc", crc},
			strings.Fields(c.opts())...)...)
		goSide = &ptSide{code: g.Code, stdout: g.Stdout, stderr: g.Stderr}
		res, err := srv.Wait(ctx, time.Minute)
		if err != nil {
			// The Go client failed before the server's end; stop it.
			res, err = srv.Stop(ctx, 5*time.Second)
		}
		require.NoError(t, err, "%s", res)
		siwSide = &ptSide{code: res.Code, stdout: res.Stdout, stderr: res.Stderr}
	}
	goSide.rows, siwSide.rows = parseRows(goSide.stdout), parseRows(siwSide.stdout)
	if stop != nil {
		pcap = stop()
	}
	return goSide, siwSide, pcap
}

// waitOrKill is wait that returns the result instead of failing the test
// when the process has to be killed.
func (p *hostProc) waitOrKill(t *testing.T, timeout time.Duration) *hostResult {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.result()
}

// siwMisreadRetries is how often a run that siw ended on a CRC field it
// misread is repeated. Each repeat is proven from siw's log to be siw's
// (siwSplitCRC), so it hides no fault of iwarp-go. With 32768-octet FPDUs
// toward siw, 51 of 59 attempts of 64 KiB Reads failed this way (item 7
// says why); with the FPDU sizes chosen since, none of 8.
const siwMisreadRetries = 4

// siwServerUnanswered reports whether a run failed the way docs/interop.md
// item 8 describes: siw's perftest server took the Go client's
// test connection and never answered its MPA Request. The Go client gave
// up on the test connection reading the MPA Reply, and the server, which
// never got as far as printing anything but its start-up notices, had to
// be stopped.
func siwServerUnanswered(c ptCase, goSide, siwSide *ptSide) bool {
	return !c.goServer && goSide.code != 0 && siwSide.code != 0 && siwSide.stdout == "" && lab.PerftestQuiet(siwSide.stderr) &&
		strings.Contains(goSide.stderr, "test connection to") && strings.Contains(goSide.stderr, "mpa: reading frame")
}

// perftestRetries is how often a run whose perftest failed its CPU-clock
// calibration is repeated (QEMU's TCG on a busy host spoils it).
const perftestRetries = 2

// runPerftest runs c, repeating it when calibration failed, and checks
// both sides: exit 0, a row per size each (none from a read_lat server),
// the same message counts. It returns the matrix's checks text; ok false
// means every attempt failed calibration.
func runPerftest(t *testing.T, ctx context.Context, c ptCase) (checks string, ok bool) {
	t.Helper()
	var g, s *ptSide
	var pcap string
	siwCRC := 0     // attempts siw ended on a CRC field it misread
	unanswered := 0 // attempts whose test connection siw's server never answered
	calibration := 0
	for attempt := 0; ; attempt++ {
		g, s, pcap = runPerftestOnce(t, ctx, c, attempt)
		first, misread := siwSplitCRC(t, ctx, c, g, s, fmt.Sprintf("%s-%d", c.test, attempt))
		if misread && siwCRC == siwMisreadRetries {
			// Every attempt ended the same way: the verdict names the
			// peer's fault, proven from its log each time, instead of
			// the exit codes it caused.
			t.Fatalf("siw misread a right CRC field split %d|%d across socket buffers in all %d attempts (a siw bug, docs/interop.md item 7); iwarp-go's FPDUs were right:\n%s",
				first, 4-first, siwCRC+1, s.stderr)
		}
		if misread {
			// A siw bug (docs/interop.md, item 7), proven by its own log:
			// the run is repeated, and the matrix says so. A retried pass
			// is never shown as a plain one.
			siwCRC++
			t.Logf("attempt %d: siw misread a CRC field that reached it split %d|%d across socket buffers, and ended the run:\n%s",
				attempt+1, first, 4-first, s.stderr)
			continue
		}
		if siwServerUnanswered(c, g, s) && unanswered < perftestRetries {
			// docs/interop.md, item 8 (a siw bug): repeated, and the matrix
			// says so.
			unanswered++
			t.Logf("attempt %d: siw's perftest server never answered the test connection's MPA Request:\n%s", attempt+1, g.stderr)
			continue
		}
		if !s.calibrationFailed() {
			break
		}
		t.Logf("attempt %d: perftest's CPU-clock calibration failed (r^2 < 0.9), an environment failure:\n%s", attempt+1, s.stderr)
		if calibration++; calibration > perftestRetries {
			return fmt.Sprintf("%s; perftest's clock calibration failed in %d attempts", c.opts(), calibration), false
		}
	}
	require.Equal(t, 0, s.code, "perftest\n%s\niwarp-peer\n%s", s, g)
	require.Equal(t, 0, g.code, "iwarp-peer\n%s\nperftest\n%s", g, s)
	want := 1
	if c.all {
		want = 23
	}
	client, server := s, g
	if !c.goServer {
		client, server = g, s
	}
	require.Len(t, client.rows, want, "the client's rows\n%s", client)
	wantServer := want
	switch {
	case c.test == "read_lat":
		wantServer = 0 // perftest's read_lat server measures nothing
	case c.test == "write_bw" || c.test == "read_bw":
		wantServer = 1 // the server prints the client's report of the last size
	}
	require.Len(t, server.rows, wantServer, "the server's rows\n%s", server)
	for i, r := range client.rows {
		assert.Equal(t, uint64(c.iters), r.iters, "the client's count, row %d", i)
	}
	for i, r := range server.rows {
		peer := client.rows[i] // the server measured the same size
		if c.test == "write_bw" || c.test == "read_bw" {
			peer = client.rows[len(client.rows)-1] // the client's report
		}
		assert.Equal(t, peer.iters, r.iters, "the sides' message counts agree")
		assert.Equal(t, peer.size, r.size)
	}
	if pcap != "" {
		requirePerftestDecodes(t, pcap, c.crc)
	}
	checks = fmt.Sprintf("%s; both exit 0; %s", c.opts(), ptNumbers(c, g, s))
	if unanswered > 0 {
		checks += fmt.Sprintf("; passed after %d run(s) whose test connection siw's server never answered (item 8)", unanswered)
	}
	if siwCRC > 0 {
		checks += fmt.Sprintf("; passed after %d run(s) siw ended on a CRC field it misread, split across socket buffers (item 7)", siwCRC)
	}
	return checks, true
}

// ptNumbers are the figures both sides printed, for the matrix: message
// counts and the average bandwidth (MB/s) or typical latency (µs) of the
// last row.
func ptNumbers(c ptCase, g, s *ptSide) string {
	col := 1 // BW average
	unit := "MB/s"
	if c.lat() {
		col, unit = 2, "µs" // t_typical
	}
	side := func(name string, p *ptSide) string {
		if len(p.rows) == 0 {
			return name + " prints no row"
		}
		r := p.rows[len(p.rows)-1]
		v := "?"
		if col < len(r.cols) {
			v = r.cols[col]
		}
		return fmt.Sprintf("%s %d msgs, %s %s", name, r.iters, v, unit)
	}
	return side("iwarp-go", g) + "; siw " + strings.TrimPrefix(side("", s), " ")
}

// requirePerftestDecodes checks every connection of a perftest run's
// capture: the comm and test connections are well formed, with CRC as
// negotiated. Connects that the host's QEMU proxy took before perftest
// listened carry no MPA exchange and are left out.
func requirePerftestDecodes(t *testing.T, pcap string, crc bool) {
	t.Helper()
	d := decodeCapture(t, pcap)
	established := 0
	for _, s := range d.Streams {
		if s.Request == nil {
			continue
		}
		established++
		require.Equal(t, "established", s.State, "stream %d", s.Index)
		require.NotNil(t, s.Reply, "stream %d", s.Index)
		assert.Equal(t, crc, s.Reply.C, "stream %d: the Reply's C bit", s.Index)
		for _, n := range s.Notes {
			assert.Failf(t, "decode note", "stream %d frame %d: %s", s.Index, n.Frame, n.Text)
		}
		for _, p := range s.PDUs {
			want := "absent"
			if crc {
				want = "good"
			}
			assert.Equal(t, want, p.CRC, "stream %d: CRC of the FPDU at frames %v (%s)", s.Index, p.Frames, p.Op)
			assert.Empty(t, p.Error, "stream %d: FPDU at frames %v (%s)", s.Index, p.Frames, p.Op)
		}
	}
	assert.Equal(t, 2, established, "the comm connection and the test connection")
	w := checkWire(t, pcap)
	assert.Zero(t, w.malformed, "tshark: malformed frames")
	assert.Zero(t, w.badCRC, "tshark: bad CRCs")
}

var ptTests = []string{"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat"}

// TestGoPerftest: each of the six perftest tests against iwarp-peer
// perftest, Go as server (ib_*_bw/_lat -R clients in the guest) and as
// client (perftest servers in the guest), at 64 B, 4 KiB and 64 KiB, CRC
// off and on: both exit 0 and their message counts agree. A run spoilt by
// perftest's CPU-clock calibration is repeated at most twice, then
// reported as an environment retry (skipped, never passed). The 4 KiB
// send_bw runs are captured and decoded (Sends and the receiver's credit
// Writes, CRC as negotiated).
func TestGoPerftest(t *testing.T) {
	// One header capture for all cases (starting one per case costs half
	// a second each); a failed case keeps its jobs' output.
	scenario(t, 40*time.Minute)
	for _, crc := range []bool{false, true} {
		for _, test := range ptTests {
			for _, goServer := range []bool{true, false} {
				for _, size := range []int{64, 4096, 65536} {
					c := ptCase{test: test, goServer: goServer, crc: crc, size: size, iters: 200}
					if c.lat() {
						c.iters = 500
					}
					name := fmt.Sprintf("crc-%s/%s/%s/%d", onOff(crc), test, roleName(goServer), size)
					if test == "send_bw" && size == 4096 {
						c.capture = "pt-" + strings.ReplaceAll(name, "/", "-")
					}
					t.Run(name, func(t *testing.T) { perftestCase(t, c) })
				}
			}
		}
	}
}

// TestGoPerftestAllSizes: write_bw -a -n 20, every size from 2 bytes to
// 8 MiB, iwarp-go as the client of perftest's server.
func TestGoPerftestAllSizes(t *testing.T) {
	scenario(t, 10*time.Minute)
	perftestCase(t, ptCase{test: "write_bw", all: true, iters: 20})
}

func perftestCase(t *testing.T, c ptCase) {
	ctx := scenarioCase(t, 10*time.Minute)
	ini, resp := roles(c.goServer)
	crcDesc := "off"
	if c.crc {
		crcDesc = "on (Go initiator asks)"
		if c.goServer {
			crcDesc = "on (Go responder sets C)"
		}
	}
	mpa := "rev 2 enhanced, IRD/ORD 0/0"
	if strings.HasPrefix(c.test, "read") {
		mpa = "rev 2 enhanced, test connection IRD/ORD 128/128"
	}
	row := record(t, matrixRow{Scenario: "perftest " + c.test, Initiator: ini, Responder: resp, CRC: crcDesc, MPA: mpa, Checks: c.opts()})
	checks, ok := runPerftest(t, ctx, c)
	row.Checks = checks
	if !ok {
		row.Outcome = "ENV RETRY"
		t.Skip(checks)
	}
}
