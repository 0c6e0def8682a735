//go:build interop

package siw_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPerfInGuest measures, from one guest boot, perftest's six tests
// between siw and siw, siw and iwarp-go, and iwarp-go and iwarp-go, all
// inside the guest (one emulated CPU, so each pair shares it), and the
// same tests between iwarp-go on the host and siw in the guest, which
// cross QEMU's user-mode network. It writes OUT/perf.md for
// docs/performance.md. It runs only with IWARP_SIW_PERF=1: it takes
// several minutes and measures, so it belongs to a quiet machine.
func TestPerfInGuest(t *testing.T) {
	if os.Getenv("IWARP_SIW_PERF") != "1" {
		t.Skip("set IWARP_SIW_PERF=1 to measure")
	}
	ctx := scenario(t, 50*time.Minute)
	// A static iwarp-peer on the share, for the guest.
	bin := filepath.Join(vm.Share(), "bin", "iwarp-peer")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/iwarp-go/iwarp-go/cmd/iwarp-peer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	const guestBin = "/mnt/bin/iwarp-peer"

	type pairing struct{ name, server, client string }
	pairs := []pairing{
		{"siw ↔ siw", "siw", "siw"},
		{"siw server, iwarp-go client", "siw", "go"},
		{"iwarp-go server, siw client", "go", "siw"},
		{"iwarp-go ↔ iwarp-go", "go", "go"},
	}
	type measure struct {
		test string
		opts string
	}
	measures := []measure{
		{"write_bw", "-s 65536 -n 500"}, {"read_bw", "-s 65536 -n 500"}, {"send_bw", "-s 65536 -n 500"},
		{"write_lat", "-s 64 -n 1000"}, {"read_lat", "-s 64 -n 1000"}, {"send_lat", "-s 64 -n 1000"},
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	var doc strings.Builder
	fmt.Fprintf(&doc, "Measured %s on the development machine (%d host CPUs, load average %s at the start).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), load())
	fmt.Fprintf(&doc, "| test | options | %s |\n|---|---|", strings.Join(func() []string {
		var h []string
		for _, p := range pairs {
			h = append(h, p.name)
		}
		return h
	}(), " | "))
	for range pairs {
		doc.WriteString("---|")
	}
	doc.WriteString("\n")
	port := 18600
	cmdFor := func(side, test, opts string, server bool) string {
		if side == "siw" {
			c := fmt.Sprintf("ib_%s -R %s -p %d", test, opts, port)
			if !server {
				c += " " + guestIP
			}
			return c
		}
		c := fmt.Sprintf("%s perftest %s %s -p %d", guestBin, test, opts, port)
		if server {
			return c + " -j " + guestIP
		}
		return c + " " + guestIP
	}
	for _, m := range measures {
		fmt.Fprintf(&doc, "| %s | `%s` |", m.test, m.opts)
		for _, p := range pairs {
			cell := ""
			for attempt := 0; attempt <= perftestRetries; attempt++ {
				port++
				name := fmt.Sprintf("perf-%s-%s%s-%d", m.test, p.server, p.client, port)
				srv := server(t, ctx, name+"-s", "exec "+cmdFor(p.server, m.test, m.opts, true), port)
				cres := run(t, ctx, 10*time.Minute, name+"-c", "exec "+cmdFor(p.client, m.test, m.opts, false))
				sres, err := srv.Wait(ctx, 2*time.Minute)
				if err != nil {
					sres, _ = srv.Stop(ctx, 5*time.Second)
				}
				c := &ptSide{code: cres.Code, stdout: cres.Stdout, stderr: cres.Stderr}
				s := &ptSide{code: sres.Code, stdout: sres.Stdout, stderr: sres.Stderr}
				c.rows, s.rows = parseRows(c.stdout), parseRows(s.stdout)
				if (p.client == "siw" && c.calibrationFailed()) || (p.server == "siw" && s.calibrationFailed()) {
					cell = "perftest's clock calibration failed"
					continue
				}
				if c.code != 0 || s.code != 0 || len(c.rows) != 1 {
					cell = fmt.Sprintf("failed (client exit %d, server exit %d)", c.code, s.code)
					t.Logf("%s %s:\nclient %s\nserver %s", p.name, m.test, c, s)
					break
				}
				cell = perfCell(m.test, c.rows[0])
				break
			}
			fmt.Fprintf(&doc, " %s |", cell)
		}
		doc.WriteString("\n")
	}
	fmt.Fprintf(&doc, "\nLoad average at the end: %s.\n", load())
	require.NoError(t, os.MkdirAll(outDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outDir, "perf.md"), []byte(doc.String()), 0o644))
	t.Logf("\n%s", doc.String())
}

// perfCell is the client's figure: average bandwidth in MB/s, or the
// typical and 99th-percentile latency in µs.
func perfCell(test string, r ptRow) string {
	if strings.HasSuffix(test, "_lat") && len(r.cols) >= 6 {
		return fmt.Sprintf("%s µs (p99 %s)", r.cols[2], r.cols[5])
	}
	if len(r.cols) >= 2 {
		return r.cols[1] + " MB/s"
	}
	return "?"
}
