package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Track scopes guest work to one test. When t finishes, every job started
// on this VM after the call that is still running is stopped, and, if t
// failed, the output and exit status of those jobs, the captures started
// after the call and the console log are copied to OutDir/<test name>/.
// Tests that share one VM must not run in parallel.
func (vm *VM) Track(t testing.TB) {
	mark := vm.mark()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		procs, files := vm.since(mark)
		for _, p := range procs {
			if !p.Exited() {
				if _, err := p.Stop(ctx, 2*time.Second); err != nil {
					t.Logf("lab: stopping job %s: %v", p.ID(), err)
				}
			}
		}
		if !t.Failed() || vm.cfg.OutDir == "" {
			return
		}
		dst := filepath.Join(vm.cfg.OutDir, sanitizeTestName(t.Name()))
		_ = os.RemoveAll(dst)
		for _, p := range procs {
			for _, suf := range []string{".out", ".err", ".exit", ".pid", ".listen"} {
				if src := p.path(suf); fileExists(src) {
					if err := copyFile(src, filepath.Join(dst, p.ID()+suf), 0o644); err != nil {
						t.Logf("lab: keeping %s: %v", src, err)
					}
				}
			}
		}
		for _, f := range files {
			if fileExists(f) {
				if err := copyFile(f, filepath.Join(dst, filepath.Base(f)), 0o644); err != nil {
					t.Logf("lab: keeping %s: %v", f, err)
				}
			}
		}
		if err := copyFile(vm.ConsoleLog(), filepath.Join(dst, "console.log"), 0o644); err != nil {
			t.Logf("lab: keeping the console log: %v", err)
		}
		t.Logf("lab: logs and captures of %s kept in %s", t.Name(), dst)
	})
}

func sanitizeTestName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, name)
}
