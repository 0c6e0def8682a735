package ddp

import (
	"errors"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

func TestErrCode_RFC5041_7_Values(t *testing.T) {
	// Triples from the IANA RDDP "DDP Errors" registry.
	for _, tc := range []struct {
		code              termcode.Code
		layer, etype, ecd uint8
		name              string
	}{
		{termcode.DDPLocalCatastrophic, 1, 0, 0x00, "Local Catastrophic"},
		{termcode.DDPTaggedInvalidSTag, 1, 1, 0x00, "Invalid Steering Tag"},
		{termcode.DDPTaggedBaseBounds, 1, 1, 0x01, "Base or bounds"},
		{termcode.DDPTaggedSTagNotAssociated, 1, 1, 0x02, "not associated"},
		{termcode.DDPTaggedTOWrap, 1, 1, 0x03, "Tagged Offset wrap"},
		{termcode.DDPTaggedVersion, 1, 1, 0x04, "Invalid DDP version"},
		{termcode.DDPUntaggedInvalidQN, 1, 2, 0x01, "Invalid Queue Number"},
		{termcode.DDPUntaggedNoBuffer, 1, 2, 0x02, "no buffer available"},
		{termcode.DDPUntaggedMSNRange, 1, 2, 0x03, "MSN range"},
		{termcode.DDPUntaggedInvalidMO, 1, 2, 0x04, "Invalid Message Offset"},
		{termcode.DDPUntaggedTooLong, 1, 2, 0x05, "too long"},
		{termcode.DDPUntaggedVersion, 1, 2, 0x06, "Invalid DDP version"},
	} {
		require.Equal(t, termcode.Layer(tc.layer), tc.code.Layer(), tc.name)
		require.Equal(t, tc.etype, tc.code.EType(), tc.name)
		require.Equal(t, tc.ecd, tc.code.ECode(), tc.name)
		require.Equal(t, termcode.Code(uint16(tc.layer)<<12|uint16(tc.etype)<<8|uint16(tc.ecd)), tc.code)
		require.Contains(t, tc.code.String(), tc.name)
		require.Contains(t, NewError(tc.code, nil, 0).Error(), "ddp: ")
	}
	require.Equal(t, "DDP Untagged Buffer Error: Invalid Queue Number (1/2/0x01)", termcode.DDPUntaggedInvalidQN.String())
	require.Contains(t, termcode.Code(0x1fff).String(), "unknown")
}

func TestError_CopiesHeader(t *testing.T) {
	hdr := AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 5, 0)
	src := append(append([]byte(nil), hdr...), 1, 2, 3) // payload bytes after the header are not copied
	e := NewError(termcode.DDPUntaggedMSNRange, src, 21)
	src[0], src[13] = 0xff, 0xff
	require.Equal(t, hdr[:UntaggedHeaderLen], e.Header())
	require.Equal(t, byte(0x41), e.Header()[0])
	require.True(t, e.HeaderComplete())
	require.Equal(t, 21, e.SegmentLen)
	require.Equal(t, termcode.Code(0x1203), e.Code)
	require.Contains(t, e.Error(), "MSN 5")
	require.Contains(t, e.Error(), "segment length 21")

	tg := NewError(termcode.DDPTaggedBaseBounds, AppendTagged(nil, MakeControl(true, true), 0x40, 0xabc, 0x10), 30)
	require.Len(t, tg.Header(), TaggedHeaderLen)
	require.True(t, tg.HeaderComplete())
	require.Contains(t, tg.Error(), "STag 0x00000abc")

	short := NewError(termcode.DDPLocalCatastrophic, hdr[:5], 5)
	require.Len(t, short.Header(), 5)
	require.False(t, short.HeaderComplete())
	require.Contains(t, short.Error(), "segment length 5")

	none := NewError(termcode.DDPLocalCatastrophic, nil, 0)
	require.Empty(t, none.Header())
	require.False(t, none.HeaderComplete())
}

func TestError_IsAndContract(t *testing.T) {
	var err error = NewError(termcode.DDPUntaggedNoBuffer, nil, 18)
	require.ErrorIs(t, err, termcode.DDPUntaggedNoBuffer)
	require.ErrorIs(t, err, &Error{Code: termcode.DDPUntaggedNoBuffer})
	require.NotErrorIs(t, err, termcode.DDPUntaggedTooLong)
	require.NotErrorIs(t, err, errors.New("other"))

	// The code is in the chain: errors.As finds it through any wrapping.
	wrapped := errors.Join(errors.New("context"), err)
	var c termcode.Code
	require.True(t, errors.As(wrapped, &c))
	require.Equal(t, termcode.DDPUntaggedNoBuffer, c)
}

func TestError_MessageHasNoRepeatedPrefix(t *testing.T) {
	e := NewError(termcode.DDPTaggedTOWrap, nil, 3)
	require.Equal(t, "ddp: DDP Tagged Buffer Error: Tagged Offset wrap (1/1/0x03): segment length 3", e.Error())
}

func TestError_CopyBoundedBySegment(t *testing.T) {
	hdr := AppendTagged(nil, MakeControl(true, true), 0x40, 1, 2)
	e := NewError(termcode.DDPLocalCatastrophic, hdr, 9)
	require.Equal(t, hdr[:9], e.Header(), "bytes past the segment are not part of it")
	require.False(t, e.HeaderComplete())
	require.Empty(t, NewError(termcode.DDPLocalCatastrophic, hdr, 0).Header())
	require.Empty(t, NewError(termcode.DDPLocalCatastrophic, hdr, -1).Header())
	var dst [MaxHeaderLen]byte
	require.Equal(t, TaggedHeaderLen, CopyHeader(&dst, hdr, 1000))
	require.Equal(t, hdr, dst[:TaggedHeaderLen])
}
