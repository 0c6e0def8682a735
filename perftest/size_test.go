package perftest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{
		"1": 1, "65536": 65536, "1K": 1024, "64K": 64 << 10, "8M": 8 << 20, "0x100": 256, "010": 8,
		"1024": 1024,
	} {
		got, err := ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	// Only upper-case K and M are suffixes.
	for _, in := range []string{"0", "-1", "", "K", "1k", "1G", "1.5K", "lots", "2147483648", "1025M"} {
		_, err := ParseSize(in)
		require.EqualError(t, err, "message size should be between 1 and 1073741824", in)
	}
	n, err := ParseSize("1024M")
	require.NoError(t, err)
	require.Equal(t, MaxMessageSize, n)
}
