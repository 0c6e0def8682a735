package rdmap

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

// Expected bytes are the control pairs and header layouts Linux siw uses
// (drivers/infiniband/sw/siw/iwarp.h header structs, the iwarp_pktinfo[]
// templates in siw_qp.c), and the Read Request values of round 15 in
// internal/capture/testdata/mpa-host-client-host.txt.
func TestEncoders_RFC5040_4_Bytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"Write RTR", AppendWrite(nil, true, 1, 0), "c1 40 00000001 0000000000000000"},
		{"Write last", AppendWrite(nil, true, 0x2222, 0x2000), "c1 40 00002222 0000000000002000"},
		{"Write middle", AppendWrite(nil, false, 0x2222, 0x2000), "81 40 00002222 0000000000002000"},
		{"Read Response", AppendReadResponse(nil, true, 0x91cda700, 0x556368789550), "c1 42 91cda700 0000556368789550"},
		{"Read Response middle", AppendReadResponse(nil, false, 1, 2), "81 42 00000001 0000000000000002"},
		{"Send", AppendSend(nil, OpSend, true, 0, 2, 0), "41 43 00000000 00000000 00000002 00000000"},
		{"Send middle", AppendSend(nil, OpSend, false, 0, 1, 0), "01 43 00000000 00000000 00000001 00000000"},
		{"Send with Invalidate", AppendSend(nil, OpSendInvalidate, true, 0xabcd0100, 3, 0), "41 44 abcd0100 00000000 00000003 00000000"},
		{"Send SE", AppendSend(nil, OpSendSE, true, 0, 4, 0x10), "41 45 00000000 00000000 00000004 00000010"},
		{"Send SE Invalidate", AppendSend(nil, OpSendSEInvalidate, true, 7, 5, 0), "41 46 00000007 00000000 00000005 00000000"},
		{"Read Request", AppendReadRequest(nil, 1, ReadRequestFields{
			SinkSTag: 0x91cda700, SinkTO: 0x556368789550, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000,
		}), "41 41 00000000 00000001 00000001 00000000 91cda700 0000556368789550 00000040 00001111 0000000000001000"},
	} {
		require.Equal(t, testutil.Unhex(t, tc.want), tc.got, tc.name)
	}
}

func TestAppendSend_RFC5040_4_1_ReservedInvalidateField(t *testing.T) {
	// Send and Send with SE carry zero where the Invalidate STag would be.
	for _, op := range []Opcode{OpSend, OpSendSE} {
		h := ddp.Untagged(AppendSend(nil, op, true, 0xdeadbeef, 1, 0))
		require.Zero(t, h.RsvdULPWord(), op)
	}
	for _, op := range []Opcode{OpWrite, OpReadRequest, OpReadResponse, OpTerminate, Opcode(9)} {
		require.Panics(t, func() { AppendSend(nil, op, true, 0, 1, 0) }, op)
		require.Panics(t, func() { _ = StartSend(&ddp.Segmenter{}, op, nil, 100, 0, 1) }, op)
	}
}

func TestReadRequest_RFC5040_4_View(t *testing.T) {
	f := ReadRequestFields{SinkSTag: 1, SinkTO: 0x0203040506070809, Size: 0x0a0b0c0d, SrcSTag: 0x0e0f1011, SrcTO: 0x1213141516171819}
	b := AppendReadRequestBody(nil, f)
	require.Len(t, b, ReadRequestBodyLen)
	rr, ok := ParseReadRequest(append(b, 0xff))
	require.True(t, ok)
	require.Len(t, rr, ReadRequestBodyLen)
	require.Equal(t, f, rr.Fields())
	_, ok = ParseReadRequest(b[:27])
	require.False(t, ok)
}

func TestSegmenterHelpers(t *testing.T) {
	var s ddp.Segmenter
	msg := [][]byte{make([]byte, 3000)}

	require.NoError(t, StartWrite(&s, msg, 1442, 0x2222, 0x2000))
	seg, ok := s.Next(nil, nil)
	require.True(t, ok)
	require.Equal(t, AppendWrite(nil, false, 0x2222, 0x2000), seg.Header)

	require.NoError(t, StartReadResponse(&s, msg, 1442, 0x91cda700, 0x556368789550))
	seg, _ = s.Next(nil, nil)
	require.Equal(t, AppendReadResponse(nil, false, 0x91cda700, 0x556368789550), seg.Header)

	require.NoError(t, StartSend(&s, OpSendInvalidate, msg, 1442, 0x77, 9))
	seg, _ = s.Next(nil, nil)
	require.Equal(t, AppendSend(nil, OpSendInvalidate, false, 0x77, 9, 0), seg.Header)
	seg, _ = s.Next(nil, nil)
	require.Equal(t, AppendSend(nil, OpSendInvalidate, false, 0x77, 9, 1424), seg.Header)

	require.NoError(t, StartSend(&s, OpSend, nil, 1442, 0x77, 2))
	seg, _ = s.Next(nil, nil)
	require.Equal(t, AppendSend(nil, OpSend, true, 0, 2, 0), seg.Header, "zero-length Send; no invalidate STag")
}
