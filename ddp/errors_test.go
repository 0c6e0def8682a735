package ddp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// terminateCoder is the contract shared with mpa and rdmap.
type terminateCoder interface{ TerminateCode() uint16 }

func TestErrCode_RFC5041_7_Values(t *testing.T) {
	// Triples from the IANA RDDP "DDP Errors" registry.
	for _, tc := range []struct {
		code              ErrCode
		layer, etype, ecd uint8
		name              string
	}{
		{ErrLocalCatastrophic, 1, 0, 0x00, "local catastrophic"},
		{ErrTaggedInvalidSTag, 1, 1, 0x00, "invalid STag"},
		{ErrTaggedBaseBounds, 1, 1, 0x01, "base or bounds"},
		{ErrTaggedSTagNotAssociated, 1, 1, 0x02, "not associated"},
		{ErrTaggedTOWrap, 1, 1, 0x03, "TO wrap"},
		{ErrTaggedVersion, 1, 1, 0x04, "invalid DDP version"},
		{ErrUntaggedInvalidQN, 1, 2, 0x01, "invalid QN"},
		{ErrUntaggedNoBuffer, 1, 2, 0x02, "no buffer available"},
		{ErrUntaggedMSNRange, 1, 2, 0x03, "MSN range"},
		{ErrUntaggedInvalidMO, 1, 2, 0x04, "invalid MO"},
		{ErrUntaggedTooLong, 1, 2, 0x05, "too long"},
		{ErrUntaggedVersion, 1, 2, 0x06, "invalid DDP version"},
		{ErrAccessRights, 0, 1, 0x02, "access rights"},
	} {
		require.Equal(t, tc.layer, tc.code.Layer(), tc.name)
		require.Equal(t, tc.etype, tc.code.EType(), tc.name)
		require.Equal(t, tc.ecd, tc.code.Code(), tc.name)
		require.Equal(t, uint16(tc.layer)<<12|uint16(tc.etype)<<8|uint16(tc.ecd), tc.code.TerminateCode())
		require.Contains(t, tc.code.String(), tc.name)
		require.Contains(t, tc.code.Error(), "ddp: ")
	}
	require.Equal(t, "untagged buffer error: invalid QN (1/2/0x01)", ErrUntaggedInvalidQN.String())
	require.Contains(t, ErrCode(0x1fff).String(), "unknown")
}

func TestError_CopiesHeader(t *testing.T) {
	hdr := AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 5, 0)
	src := append(append([]byte(nil), hdr...), 1, 2, 3) // payload bytes after the header are not copied
	e := NewError(ErrUntaggedMSNRange, src, 21)
	src[0], src[13] = 0xff, 0xff
	require.Equal(t, hdr[:UntaggedHeaderLen], e.Header())
	require.Equal(t, byte(0x41), e.Header()[0])
	require.True(t, e.HeaderComplete())
	require.Equal(t, 21, e.SegmentLen)
	require.Equal(t, uint16(0x1203), e.TerminateCode())
	require.Contains(t, e.Error(), "MSN 5")
	require.Contains(t, e.Error(), "segment length 21")

	tg := NewError(ErrTaggedBaseBounds, AppendTagged(nil, MakeControl(true, true), 0x40, 0xabc, 0x10), 30)
	require.Len(t, tg.Header(), TaggedHeaderLen)
	require.True(t, tg.HeaderComplete())
	require.Contains(t, tg.Error(), "STag 0x00000abc")

	short := NewError(ErrLocalCatastrophic, hdr[:5], 5)
	require.Len(t, short.Header(), 5)
	require.False(t, short.HeaderComplete())
	require.Contains(t, short.Error(), "segment length 5")

	none := NewError(ErrLocalCatastrophic, nil, 0)
	require.Empty(t, none.Header())
	require.False(t, none.HeaderComplete())
}

func TestError_IsAndContract(t *testing.T) {
	var err error = NewError(ErrUntaggedNoBuffer, nil, 18)
	require.ErrorIs(t, err, ErrUntaggedNoBuffer)
	require.ErrorIs(t, err, &Error{Code: ErrUntaggedNoBuffer})
	require.NotErrorIs(t, err, ErrUntaggedTooLong)
	require.NotErrorIs(t, err, errors.New("other"))

	wrapped := errors.Join(errors.New("context"), err)
	var tc terminateCoder
	require.True(t, errors.As(wrapped, &tc))
	require.Equal(t, uint16(0x1202), tc.TerminateCode())
	var _ terminateCoder = ErrTaggedTOWrap
}

func TestError_MessageHasNoRepeatedPrefix(t *testing.T) {
	e := NewError(ErrTaggedTOWrap, nil, 3)
	require.Equal(t, "ddp: tagged buffer error: TO wrap (1/1/0x03): segment length 3", e.Error())
}

func TestError_CopyBoundedBySegment(t *testing.T) {
	hdr := AppendTagged(nil, MakeControl(true, true), 0x40, 1, 2)
	e := NewError(ErrLocalCatastrophic, hdr, 9)
	require.Equal(t, hdr[:9], e.Header(), "bytes past the segment are not part of it")
	require.False(t, e.HeaderComplete())
	require.Empty(t, NewError(ErrLocalCatastrophic, hdr, 0).Header())
	require.Empty(t, NewError(ErrLocalCatastrophic, hdr, -1).Header())
	var dst [MaxHeaderLen]byte
	require.Equal(t, TaggedHeaderLen, CopyHeader(&dst, hdr, 1000))
	require.Equal(t, hdr, dst[:TaggedHeaderLen])
}
