package iwtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTests(t *testing.T) {
	got, err := ParseTests("write,send_inv")
	require.NoError(t, err)
	require.Equal(t, []Test{TestWrite, TestSendInv}, got)
	got, err = ParseTests("all")
	require.NoError(t, err)
	require.Equal(t, AllTests(), got)
	got, err = ParseTests("read,all")
	require.NoError(t, err)
	require.Equal(t, append([]Test{TestRead}, AllTests()...), got, "a list is taken as written")
	for _, in := range []string{"nope", "write,", "", "Write"} {
		_, err := ParseTests(in)
		require.Error(t, err, in)
	}
	_, err = ParseTests("write,nope")
	require.EqualError(t, err, "unknown test nope")
}

// -S takes sizes from 1 byte to 16 MiB with k and m suffixes.
func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("1,4k,64K,16m")
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 4096, 65536, 16 << 20}, got)
	for _, in := range []string{"0", "16777217", "17m", "-1", "k", "4g", "", "1.5k", "1,,2"} {
		_, err := ParseSizes(in)
		require.ErrorContains(t, err, "bad size", in)
	}
	_, err = ParseSizes("4096,0")
	require.EqualError(t, err, "bad size 0 (1..16m)")
}

func TestParseDirsAndProvoke(t *testing.T) {
	for s, want := range map[string]int{"c2s": C2S, "s2c": S2C, "both": Both} {
		got, err := ParseDirs(s)
		require.NoError(t, err)
		require.Equal(t, want, got, s)
	}
	_, err := ParseDirs("up")
	require.EqualError(t, err, `--dirs "up": want c2s, s2c or both`)
	for s, want := range map[string]Provoke{"": 0, "access": ProvokeAccess, "bounds": ProvokeBounds} {
		got, err := ParseProvoke(s)
		require.NoError(t, err)
		require.Equal(t, want, got, s)
		if s != "" {
			require.Equal(t, s, got.String())
		}
	}
	_, err = ParseProvoke("none")
	require.EqualError(t, err, `--provoke "none": want access or bounds`)
}
