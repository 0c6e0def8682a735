//go:build interop

package siw_test

import (
	"bufio"
	"compress/gzip"
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

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
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
	// Outcome, when a test sets it, is the result instead of PASS or SKIP
	// (an environment retry).
	Outcome string
	Took    time.Duration
}

var matrix struct {
	mu   sync.Mutex
	rows []*matrixRow
}

// record adds a row for t; its result is t's, taken when t finishes. The
// test may fill in the returned row while it runs.
func record(t *testing.T, r matrixRow) *matrixRow {
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
		case row.Outcome != "":
			row.Result = row.Outcome
		case t.Skipped():
			row.Result = "SKIP"
		default:
			row.Result = "PASS"
		}
	})
	return row
}

// versions reports the guest kernel (uname -r in the guest, with the
// Debian package version build.sh recorded) and the rdma-core version
// (the tail of libibverbs' file name in the userspace tree the image was
// built from; the image itself holds the library under its soname).
func versions(ctx context.Context) (kernel, rdmaCore, rpma string) {
	kernel, rdmaCore, rpma = "unknown", "unknown", "unknown"
	if res, err := vm.Run(ctx, 30*time.Second, "uname", "uname -r"); err == nil && res.OK() {
		kernel = strings.TrimSpace(res.Stdout)
	}
	env := os.Getenv("IWARP_SIW_ENV")
	if env == "" {
		env = lab.DefaultEnvFile()
	}
	b, err := os.ReadFile(env)
	if err != nil {
		return kernel, rdmaCore, rpma
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = v
		}
	}
	if v := vars["SIW_KPKGVER"]; v != "" {
		kernel += " (Debian " + v + ")"
	}
	libs, _ := filepath.Glob(filepath.Join(vars["SIW_USERROOT"], "usr/lib/*/libibverbs.so.1.*"))
	for _, l := range libs {
		if m := soVersion.FindStringSubmatch(filepath.Base(l)); m != nil {
			rdmaCore = m[1]
		}
	}
	if v := debianVersion(filepath.Join(vars["SIW_USERROOT"], "usr/share/doc/librpma0/changelog.Debian.gz")); v != "" {
		rpma = v
	}
	return kernel, rdmaCore, rpma
}

// debianVersion reads the version from the first line of a package's
// changelog.Debian.gz ("rpma (1.2.0-1) unstable; …"); "" if it cannot.
func debianVersion(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return ""
	}
	line, _ := bufio.NewReader(z).ReadString('\n')
	if m := debVersion.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

var debVersion = regexp.MustCompile(`^\S+ \(([^)]+)\)`)

var soVersion = regexp.MustCompile(`^libibverbs\.so\.1\.\d+\.(\d+\.\d+)$`)

// writeMatrix writes OUT/matrix.md if any row was recorded.
func writeMatrix(ctx context.Context, dir string) error {
	matrix.mu.Lock()
	rows := append([]*matrixRow(nil), matrix.rows...)
	matrix.mu.Unlock()
	if len(rows) == 0 || dir == "" {
		return nil
	}
	kernel, rdmaCore, rpma := versions(ctx)
	var b strings.Builder
	pass := 0
	for _, r := range rows {
		if r.Result == "PASS" {
			pass++
		}
	}
	fmt.Fprintf(&b, "Run of %s: %d of %d cases passed.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), pass, len(rows))
	fmt.Fprintf(&b, "- Linux %s with siw.ko built from the same Debian linux-source (the stock build; the knobs build where the MPA column names a module parameter)\n", kernel)
	fmt.Fprintf(&b, "- rdma-core %s (Debian bookworm packages: rping, libibverbs, librdmacm; iwtest built against them)\n", rdmaCore)
	fmt.Fprintf(&b, "- librpma %s (Debian bookworm's librpma0; rpmaclient built against it)\n", rpma)
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
