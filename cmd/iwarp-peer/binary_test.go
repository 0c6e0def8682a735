package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// peerBinary builds iwarp-peer once for the tests that run it as a
// process of its own.
func peerBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "iwarp-peer-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "iwarp-peer")
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, built.err)
	return built.path
}

// removeBinary is called by TestMain after the tests.
func removeBinary() {
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
}
