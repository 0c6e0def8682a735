package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lineBudget bounds the non-test Go of this package. cmd/iwarp-peer holds
// flags and output only: the protocols, the building of connection
// options and the plumbing live in importable packages with unit tests
// of their own, which the interop suite and other programs use without
// the binary. Logic that piles up here can be tested only through the
// command line and imported by nothing, so when this test fails, move
// what is not flags and output into such a package rather than raise the
// budget.
const lineBudget = 1500

func TestLineBudget(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	total := 0
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++ // a last line without its newline counts too
		}
		total += n
		files = append(files, fmt.Sprintf("%s %d", name, n))
	}
	require.Contains(t, strings.Join(files, "\n"), "main.go ", "the package's own directory was read")
	require.LessOrEqual(t, total, lineBudget, "non-test Go lines of cmd/iwarp-peer:\n%s", strings.Join(files, "\n"))
	t.Logf("%d non-test Go lines of %d", total, lineBudget)
}
