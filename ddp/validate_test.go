package ddp

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

func TestCheckHeader_RFC5041_4_1_Version(t *testing.T) {
	tagged := AppendTagged(nil, Control(0xc2), 0x40, 1, 0) // DV 2
	_, err := CheckHeader(tagged, 14)
	require.ErrorIs(t, err, termcode.DDPTaggedVersion)
	require.Equal(t, tagged, err.(*Error).Header())

	untagged := AppendUntagged(nil, Control(0x40), 0x43, 0, 0, 1, 0) // DV 0
	_, err = CheckHeader(untagged, 18)
	require.ErrorIs(t, err, termcode.DDPUntaggedVersion)

	// Reserved control bits are ignored.
	ok := AppendTagged(nil, Control(0xfd), 0x40, 1, 0)
	c, err := CheckHeader(ok, 20)
	require.NoError(t, err)
	require.True(t, c.Tagged())
}

func TestCheckHeader_SegmentTooShort(t *testing.T) {
	h := AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 1, 0)
	for segLen := 1; segLen < UntaggedHeaderLen; segLen++ {
		_, err := CheckHeader(h, segLen)
		require.ErrorIs(t, err, termcode.DDPLocalCatastrophic, segLen)
		require.Len(t, err.(*Error).Header(), segLen)
		require.False(t, err.(*Error).HeaderComplete())
	}
	_, err := CheckHeader(h, 0)
	require.ErrorIs(t, err, termcode.DDPLocalCatastrophic)
	_, err = CheckHeader(nil, 0)
	require.ErrorIs(t, err, termcode.DDPLocalCatastrophic)

	// A tagged header needs only 14 bytes.
	tg := AppendTagged(nil, MakeControl(true, true), 0x40, 1, 0)
	_, err = CheckHeader(tg, 13)
	require.ErrorIs(t, err, termcode.DDPLocalCatastrophic)
	_, err = CheckHeader(tg, 14)
	require.NoError(t, err)
}

func TestCheckHeader_ShortBufferIsCallerError(t *testing.T) {
	h := AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 1, 0)
	_, err := CheckHeader(h[:10], 100)
	require.ErrorIs(t, err, ErrShortBuffer)
	_, coded := termcode.Of(err)
	require.False(t, coded, "a caller's mistake carries no Terminate code")
	_, err = CheckHeader(nil, 100)
	require.ErrorIs(t, err, ErrShortBuffer)
}
