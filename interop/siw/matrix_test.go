//go:build interop

package siw_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The interop matrix: every host↔guest case records one row (scenario,
// who initiates and who responds, CRC, MPA variant, what it checks) and
// its result. At the end of the run the rows go to OUT/matrix.md, from
// which `run.sh docs` fills docs/interop.md.

type matrixRow struct {
	Test      string // the (sub)test that produced the row
	Scenario  string
	Initiator string
	Responder string
	CRC       string
	MPA       string
	Checks    string
	Result    string
	Took      time.Duration
}

var matrix struct {
	mu   sync.Mutex
	rows []*matrixRow
}

// record adds a row for t; its result is t's, taken when t finishes.
func record(t *testing.T, r matrixRow) {
	t.Helper()
	r.Test = t.Name()
	row := &r
	start := time.Now()
	matrix.mu.Lock()
	matrix.rows = append(matrix.rows, row)
	matrix.mu.Unlock()
	t.Cleanup(func() {
		matrix.mu.Lock()
		defer matrix.mu.Unlock()
		row.Took = time.Since(start)
		switch {
		case t.Failed():
			row.Result = "FAIL"
		case t.Skipped():
			row.Result = "SKIP"
		default:
			row.Result = "PASS"
		}
	})
}

var soVersion = regexp.MustCompile(`libibverbs\.so\.1\.\d+\.(\d+\.\d+)`)

// guestVersions asks the guest for its kernel and rdma-core versions
// (rdma-core's version is the tail of the libibverbs file name).
func guestVersions(ctx context.Context) (kernel, rdmaCore string) {
	kernel, rdmaCore = "unknown", "unknown"
	res, err := vm.Run(ctx, 30*time.Second, "versions",
		"uname -r; cat /proc/version; for f in /lib/*/libibverbs.so.1 /usr/lib/*/libibverbs.so.1; do [ -e $f ] && readlink -f $f; done; true")
	if err != nil || !res.OK() {
		return kernel, rdmaCore
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) > 1 {
		kernel = lines[1]
		if i := strings.Index(kernel, " ("); i > 0 {
			kernel = kernel[:i]
		}
		if m := regexp.MustCompile(`Debian ([^ )]+)`).FindStringSubmatch(lines[1]); m != nil {
			kernel += " (Debian " + m[1] + ")"
		}
	}
	if m := soVersion.FindStringSubmatch(res.Stdout); m != nil {
		rdmaCore = m[1]
	}
	return kernel, rdmaCore
}

// writeMatrix writes OUT/matrix.md if any row was recorded.
func writeMatrix(ctx context.Context, dir string) error {
	matrix.mu.Lock()
	rows := append([]*matrixRow(nil), matrix.rows...)
	matrix.mu.Unlock()
	if len(rows) == 0 || dir == "" {
		return nil
	}
	kernel, rdmaCore := guestVersions(ctx)
	var b strings.Builder
	pass := 0
	for _, r := range rows {
		if r.Result == "PASS" {
			pass++
		}
	}
	fmt.Fprintf(&b, "Run of %s: %d of %d cases passed.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), pass, len(rows))
	fmt.Fprintf(&b, "- Linux siw: %s, siw.ko built from Debian's linux-source (stock; knobs build where the MPA column says so)\n", kernel)
	fmt.Fprintf(&b, "- rdma-core: %s (Debian bookworm: rping, iwtest built against libibverbs/librdmacm)\n", rdmaCore)
	fmt.Fprintf(&b, "- iwarp-go: iwarp-peer built with %s, on %s/%s; the guest runs under QEMU TCG with user networking\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
	b.WriteString("| scenario | initiator | responder | CRC | MPA variant | checks | result | time | test |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		res := r.Result
		if res == "" {
			res = "no result"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.1fs | `%s` |\n", r.Scenario, r.Initiator, r.Responder, r.CRC,
			r.MPA, r.Checks, res, r.Took.Seconds(), r.Test)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(b.String()), 0o644)
}
