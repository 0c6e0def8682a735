package lab_test

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/interop/siw/lab"
	"github.com/stretchr/testify/require"
)

// The kernel log of the lab's two failures (docs/interop.md, item 7), and
// lines the split cannot explain.
func TestSiwCRCError_SplitField(t *testing.T) {
	log := `[   19.947771] eth0 speed is unknown, defaulting to 1000
[   20.476073] siw: crc error. in: 3f884013, own 8840136f, op 2
[   49.291062] siw: crc error. in: a91fd7f2, own f21fd788, op 2
[   50.000000] siw: crc error. in: 12345678, own 9abcdef0, op 0
[   51.000000] siw: crc error. in: 9abcdef0, own 9abcdef0, op 3
`
	errs := lab.ParseSiwCRCErrors(log)
	require.Len(t, errs, 4)
	require.Equal(t, lab.SiwCRCError{In: [4]byte{0x13, 0x40, 0x88, 0x3f}, Own: [4]byte{0x6f, 0x13, 0x40, 0x88}, Op: 2}, errs[0])
	for i, want := range []struct {
		first int
		ok    bool
	}{{1, true}, {3, true}, {0, false}, {0, false}} {
		first, ok := errs[i].SplitField()
		require.Equal(t, want.ok, ok, "line %d", i)
		require.Equal(t, want.first, first, "line %d", i)
	}
	// A split after two octets: the second half first, then the previous
	// FPDU's last two.
	e := lab.SiwCRCError{In: [4]byte{0xc3, 0xd4, 0x55, 0x66}, Own: [4]byte{0xa1, 0xb2, 0xc3, 0xd4}}
	first, ok := e.SplitField()
	require.True(t, ok)
	require.Equal(t, 2, first)
	require.Empty(t, lab.ParseSiwCRCErrors("siw: got TERMINATE. layer 1, type 0, code 2"))
}
