package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// SiwCaptures names the captures of Linux siw traffic (rping and perftest
// runs, and the MPA test harness against siw in both roles), without the
// .pcap extension. internal/capture/testdata/pcap-summary.txt describes
// each one.
var SiwCaptures = []string{"mpa-host-client", "mpa-guest-client", "rping-lo", "rping-mtu1500", "ib_send_bw", "ib_write_bw"}

// captureDir is where the module keeps its captures, relative to the
// module root: with the package that reads them.
const captureDir = "internal/capture/testdata"

// CapturePath returns the path of a file kept with the captures, such as
// "rping-lo.pcap" or "pcap-summary.txt", from a test in any package of the
// module. The repository holds each capture once; tests elsewhere find it
// here instead of keeping a copy.
func CapturePath(tb testing.TB, name string) string {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatalf("captures: %v", err)
	}
	// go test runs in the package's directory: the module root is the
	// nearest directory above it with a go.mod.
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, filepath.FromSlash(captureDir), name)
			if _, err := os.Stat(p); err != nil {
				tb.Fatalf("captures: %v", err)
			}
			return p
		}
		if filepath.Dir(dir) == dir {
			tb.Fatalf("captures: no go.mod above %s", wd)
		}
	}
}
