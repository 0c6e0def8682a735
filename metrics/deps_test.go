package metrics_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Only metrics/iwarpprom (and the commands that use it) depend on
// client_golang: the library, this package and the expvar exporter build
// without it.
func TestDependencies_PrometheusStaysOut(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	pkgs := []string{"./conn", "./mpa", "./ddp", "./rdmap", "./stag", "./termcode", "./pmemsink", "./pcaptap",
		"./dissect", "./rpma", "./metrics", "./metrics/iwarpexpvar"}
	cmd := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/iwarp-go/iwarp-go/conn", "the list is real")
	for _, d := range deps {
		require.NotContains(t, d, "prometheus", "%s", d)
	}
}
