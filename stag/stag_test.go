package stag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSTag_IndexKeyLayout(t *testing.T) {
	s := MakeSTag(0xabcdef, 0x42)
	require.Equal(t, STag(0xabcdef42), s)
	require.Equal(t, uint32(0xabcdef), s.Index())
	require.Equal(t, uint8(0x42), s.Key())
	require.Equal(t, "0xabcdef42", s.String())

	// Bits above the 24-bit index are dropped, not shifted into nowhere.
	require.Equal(t, STag(0x00000107), MakeSTag(0xff000001, 7))
	require.Equal(t, STag(0xffffffff), MakeSTag(MaxIndex, 0xff))
}

func TestSTag_ReservedRange(t *testing.T) {
	// Every well-known RTR STag falls below the first index handed out.
	for _, s := range []STag{0, 1, 0x1234, 0xabcd} {
		require.Less(t, s.Index(), uint32(FirstIndex), "%v", s)
	}
}
