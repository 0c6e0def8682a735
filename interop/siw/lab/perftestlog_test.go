package lab

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPerftestQuiet(t *testing.T) {
	notice := "Device not recognized to implement inline feature. Disabling it\n"
	for stderr, want := range map[string]bool{
		"":            true,
		"\n\n":        true,
		notice:        true,
		notice + "\n": true,
		"  " + notice: true,
		notice + " Couldn't connect to 10.0.2.2:18515\n":   false,
		"Failed status 21: wr_id 0 syndrom 0x0\n" + notice: false,
		"Device not recognized\n":                          false,
	} {
		require.Equal(t, want, PerftestQuiet(stderr), "%q", stderr)
	}
}
