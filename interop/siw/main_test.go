//go:build interop

package siw_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
)

// vm is the one guest all scenarios of a run share: booting costs tens of
// seconds under TCG, a scenario a few.
var vm *lab.VM

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run() // listing needs no VM
	}
	cfg, err := lab.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Log = os.Stderr
	// The DAX scenario's pmem range, on every boot: it costs the boot
	// nothing measurable (README), and the suite keeps one boot.
	cfg.PmemMB = guestPmemMB
	outDir = cfg.OutDir
	// The host-side peer is built once per run, before the guest boots.
	binDir, err := os.MkdirTemp("", "iwarp-peer-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	if peerBin, err = buildPeer(binDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The DAX scenario's test binary compiles (tens of seconds on a cold
	// cache) while the guest boots.
	if selected("TestPmemDAX") {
		pmemsinkTest = startPmemsinkTestBuild(binDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	vm, err = lab.Boot(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if pmemsinkTest != nil {
		pmemsinkTest.wait() // a build nobody waited for must not outlive binDir
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	if err := writeMatrix(sctx, cfg.OutDir); err != nil {
		fmt.Fprintln(os.Stderr, "writing the interop matrix:", err)
	}
	if code != 0 && cfg.OutDir != "" {
		if err := vm.SaveArtifacts(cfg.OutDir + "/vm"); err != nil {
			fmt.Fprintln(os.Stderr, "keeping VM logs:", err)
		}
	}
	if err := vm.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// guestPmemMB is the size of the guest's legacy pmem range (lab.Config.PmemMB).
const guestPmemMB = 256

// selected reports whether -test.run (empty: every test) selects the
// top-level test name.
func selected(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err != nil || re.MatchString(name)
}
