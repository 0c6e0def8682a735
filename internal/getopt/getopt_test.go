package getopt

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func rpingFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	for _, b := range []string{"c", "v", "V", "d"} {
		fs.Bool(b, false, "")
	}
	for _, s := range []string{"C", "S", "a", "crc", "p2p"} {
		fs.String(s, "", "")
	}
	return fs
}

func TestExpand(t *testing.T) {
	fs := rpingFlags()
	require.Equal(t, []string{"-v", "-V", "-d"}, Expand(fs, []string{"-vVd"}))
	require.Equal(t, []string{"-C", "10", "-S", "64"}, Expand(fs, []string{"-C10", "-S", "64"}))
	require.Equal(t, []string{"-c", "-a", "::1"}, Expand(fs, []string{"-ca", "::1"}))
	require.Equal(t, []string{"-crc", "off", "-p2p", "write"}, Expand(fs, []string{"-crc", "off", "-p2p", "write"}))
	require.Equal(t, []string{"-a", "-vV"}, Expand(fs, []string{"-a", "-vV"}), "a flag's value is not a cluster")
	require.Equal(t, []string{"-v", "x", "-vV"}, Expand(fs, []string{"-v", "x", "-vV"}), "no expansion after the first argument")
	require.Equal(t, []string{"--vV"}, Expand(fs, []string{"--vV"}))
}

// The corners: "--" and a lone "-" end the flags; a value given with "="
// does not take the next argument; an unknown letter inside a cluster is
// handed on whole, for the flag package to report.
func TestExpand_Edges(t *testing.T) {
	fs := rpingFlags()
	require.Equal(t, []string{"-v", "--", "-vV"}, Expand(fs, []string{"-v", "--", "-vV"}))
	require.Equal(t, []string{"-", "-vV"}, Expand(fs, []string{"-", "-vV"}))
	require.Equal(t, []string{"-crc=off", "-v", "-V"}, Expand(fs, []string{"-crc=off", "-vV"}))
	require.Equal(t, []string{"-v", "-xV"}, Expand(fs, []string{"-vxV"}))
	require.Equal(t, []string{"-v", "-C"}, Expand(fs, []string{"-vC"}), "a missing value is the flag package's to report")
	require.Equal(t, []string{"-v", "-C", "-S"}, Expand(fs, []string{"-vC", "-S"}), "a value-taking last letter takes the next argument")
	require.Equal(t, []string{}, Expand(fs, nil))

	parsed := flag.NewFlagSet("p", flag.ContinueOnError)
	count := parsed.Int("C", 0, "")
	verbose := parsed.Bool("v", false, "")
	require.NoError(t, parsed.Parse(Expand(parsed, []string{"-vC7", "rest"})))
	require.Equal(t, 7, *count)
	require.True(t, *verbose)
	require.Equal(t, []string{"rest"}, parsed.Args())
}
