package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of an external program a test uses as an
// oracle (tshark, for one). Without it the test is skipped, unless the
// environment sets IWARP_REQUIRE_TOOLS=1 (as CI does), where it fails.
func RequireTool(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("IWARP_REQUIRE_TOOLS") == "1" {
			tb.Fatalf("%s is required (IWARP_REQUIRE_TOOLS=1) but not found: %v", name, err)
		}
		tb.Skipf("%s not installed", name)
	}
	return p
}
