package rdmap

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestParse_RFC5040_4_MessageKinds(t *testing.T) {
	rr := ReadRequestFields{SinkSTag: 0x91cda700, SinkTO: 0x556368789550, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000}

	h, err := Parse(AppendWrite(nil, true, 0x2222, 0x2000), 14+64)
	require.NoError(t, err)
	require.Equal(t, OpWrite, h.Op)
	require.True(t, h.Last)
	require.Equal(t, 14, h.Len)
	require.Equal(t, 64, h.PayloadLen)
	require.Equal(t, uint32(0x2222), h.Tagged().STag())
	require.Equal(t, uint64(0x2000), h.Tagged().TO())
	require.Nil(t, h.Untagged())
	require.False(t, h.IsWriteRTR())

	h, err = Parse(AppendReadResponse(nil, false, 9, 10), 1442)
	require.NoError(t, err)
	require.Equal(t, OpReadResponse, h.Op)
	require.False(t, h.Last)
	require.Equal(t, 1428, h.PayloadLen)

	h, err = Parse(AppendSend(nil, OpSendSEInvalidate, true, 0x55, 2, 0), 18+16)
	require.NoError(t, err)
	require.Equal(t, OpSendSEInvalidate, h.Op)
	require.Equal(t, uint32(0x55), h.InvalidateSTag())
	require.Equal(t, uint32(2), h.Untagged().MSN())
	require.Equal(t, 16, h.PayloadLen)
	require.Nil(t, h.Tagged())

	h, err = Parse(AppendSend(nil, OpSend, true, 0, 1, 0), 18)
	require.NoError(t, err)
	require.Zero(t, h.InvalidateSTag())

	b := AppendReadRequest(nil, 1, rr)
	h, err = Parse(b, len(b))
	require.NoError(t, err)
	require.Equal(t, OpReadRequest, h.Op)
	require.Equal(t, 46, h.Len)
	require.Zero(t, h.PayloadLen)
	require.Equal(t, rr, h.ReadRequest().Fields())

	term := AppendTerminate(nil, &Terminate{Code: termcode.MPACRC})
	h, err = Parse(term, len(term))
	require.NoError(t, err)
	require.Equal(t, OpTerminate, h.Op)
	require.Equal(t, 22, h.Len)
}

func TestParse_RFC6581_WriteRTR(t *testing.T) {
	h, err := Parse(testutil.Unhex(t, "c1 40 00000001 0000000000000000"), 14)
	require.NoError(t, err)
	require.True(t, h.IsWriteRTR())
	require.True(t, ddp.ZeroLengthMessage(h.Tagged(), 14))
	h, err = Parse(AppendReadResponse(nil, true, 1, 0), 14)
	require.NoError(t, err)
	require.False(t, h.IsWriteRTR(), "a zero-length Read Response is not an RTR")
	h, err = Parse(AppendWrite(nil, false, 1, 0), 14)
	require.NoError(t, err)
	require.False(t, h.IsWriteRTR())
}

func TestParse_RFC5040_7_Errors(t *testing.T) {
	rrBody := AppendReadRequestBody(nil, ReadRequestFields{Size: 8})
	withRR := func(hdr []byte) []byte { return append(hdr, rrBody...) }
	for _, tc := range []struct {
		name   string
		b      []byte
		ulpdu  int
		cond   Condition // 0: a *ddp.Error with code want
		want   termcode.Code
		hdrLen int // bytes of DDP header kept in the error
	}{
		{"DDP version tagged", ddp.AppendTagged(nil, 0xc2, 0x40, 1, 0), 14, 0, termcode.DDPTaggedVersion, 14},
		{"DDP version untagged", ddp.AppendUntagged(nil, 0x40, 0x43, 0, 0, 1, 0), 18, 0, termcode.DDPUntaggedVersion, 18},
		{"ULPDU shorter than DDP header", AppendSend(nil, OpSend, true, 0, 1, 0), 10, 0, termcode.DDPLocalCatastrophic, 10},
		{"RDMAP version 0", ddp.AppendTagged(nil, 0xc1, 0x00, 1, 0), 14, RDMAPVersion, termcode.RDMAPInvalidVersion, 14},
		{"RDMAP version 2", ddp.AppendUntagged(nil, 0x41, 0x83, 0, 0, 1, 0), 18, RDMAPVersion, termcode.RDMAPInvalidVersion, 18},
		{"opcode 8 (RFC 7306 Immediate Data)", ddp.AppendUntagged(nil, 0x41, 0x48, 0, 0, 1, 0), 26, UnexpectedOpcode, termcode.RDMAPUnexpectedOpcode, 18},
		{"opcode 0xA (Atomic Request)", withRR(ddp.AppendUntagged(nil, 0x41, 0x4a, 0, 1, 1, 0)), 70, UnexpectedOpcode, termcode.RDMAPUnexpectedOpcode, 18},
		{"opcode 0xF tagged", ddp.AppendTagged(nil, 0xc1, 0x4f, 1, 0), 14, UnexpectedOpcode, termcode.RDMAPUnexpectedOpcode, 14},
		{"Send with T set", ddp.AppendTagged(nil, 0xc1, 0x43, 1, 0), 20, TaggedFlagMismatch, termcode.RDMAPUnexpectedOpcode, 14},
		{"Write with T clear", ddp.AppendUntagged(nil, 0x41, 0x40, 0, 0, 1, 0), 20, TaggedFlagMismatch, termcode.RDMAPUnexpectedOpcode, 18},
		{"Read Request truncated", withRR(AppendReadRequest(nil, 1, ReadRequestFields{})[:18]), 45, SegmentTooShort, termcode.DDPLocalCatastrophic, 18},
		{"Terminate truncated", AppendTerminate(nil, &Terminate{}), 21, SegmentTooShort, termcode.DDPLocalCatastrophic, 18},
		{"Send on QN 1", ddp.AppendUntagged(nil, 0x41, 0x43, 0, 1, 1, 0), 18, UntaggedInvalidQN, termcode.DDPUntaggedInvalidQN, 18},
		{"Read Request on QN 0", withRR(ddp.AppendUntagged(nil, 0x41, 0x41, 0, 0, 1, 0)), 46, UntaggedInvalidQN, termcode.DDPUntaggedInvalidQN, 18},
		{"Read Request with payload", append(AppendReadRequest(nil, 1, ReadRequestFields{}), 1, 2), 48, ReadReqMalformed, termcode.RDMAPStreamCatastrophic, 18},
		{"Read Request without L", withRR(ddp.AppendUntagged(nil, 0x01, 0x41, 0, 1, 1, 0)), 46, ReadReqMalformed, termcode.RDMAPStreamCatastrophic, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b, tc.ulpdu)
			require.Error(t, err)
			code, ok := termcode.Of(err)
			require.True(t, ok)
			require.Equal(t, tc.want, code)
			if tc.cond != 0 {
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, tc.cond, e.Cond)
				require.ErrorIs(t, err, tc.cond)
				require.Len(t, e.DDPHeader(), tc.hdrLen)
				require.Equal(t, tc.ulpdu, e.SegmentLen)
			} else {
				var e *ddp.Error
				require.ErrorAs(t, err, &e)
				require.Len(t, e.Header(), tc.hdrLen)
			}
		})
	}
}

func TestParse_TerminateQNIsLenient(t *testing.T) {
	b := ddp.AppendUntagged(nil, 0x41, 0x47, 0, 5, 9, 3) // bogus QN, MSN, MO
	b = append(b, 0x20, 0x02, 0, 0)
	h, err := Parse(b, len(b))
	require.NoError(t, err)
	require.Equal(t, OpTerminate, h.Op)
	rt, err := ParseTerminate(b)
	require.NoError(t, err)
	require.False(t, rt.Conforming())
	require.Equal(t, termcode.MPACRC, rt.Code())
}

func TestParse_ShortBufferIsCallerError(t *testing.T) {
	b := AppendReadRequest(nil, 1, ReadRequestFields{})
	_, err := Parse(b[:30], 46)
	require.ErrorIs(t, err, ddp.ErrShortBuffer)
	_, ok := termcode.Of(err)
	require.False(t, ok)
}

func TestParse_HotPathAllocs(t *testing.T) {
	w := AppendWrite(nil, true, 0x2222, 0x2000)
	s := AppendSend(nil, OpSend, true, 0, 1, 0)
	rr := AppendReadResponse(nil, false, 1, 0)
	allocs := testing.AllocsPerRun(200, func() {
		for _, b := range [][]byte{w, s, rr} {
			if _, err := Parse(b, 1000); err != nil {
				panic(err)
			}
		}
	})
	require.Zero(t, allocs)
	var buf [64]byte
	allocs = testing.AllocsPerRun(200, func() {
		_ = AppendWrite(buf[:0], true, 1, 2)
		_ = AppendSend(buf[:0], OpSendSE, false, 0, 1, 2)
		_ = AppendReadResponse(buf[:0], true, 1, 2)
	})
	require.Zero(t, allocs)
}

func TestHeader_ZeroValueViewsAreNil(t *testing.T) {
	var h Header // Op is 0, RDMA Write, but nothing was parsed
	require.Nil(t, h.Tagged())
	require.Nil(t, h.Untagged())
	require.Nil(t, h.ReadRequest())
	require.Zero(t, h.InvalidateSTag())
	require.Nil(t, h.Bytes())
}
