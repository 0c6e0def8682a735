package ddp

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

func TestHeaderSizes_RFC5041_4(t *testing.T) {
	require.Equal(t, 14, TaggedHeaderLen)
	require.Equal(t, 18, UntaggedHeaderLen)
	require.Equal(t, 18, MaxHeaderLen)
	require.Len(t, AppendTagged(nil, 0, 0, 0, 0), TaggedHeaderLen)
	require.Len(t, AppendUntagged(nil, 0, 0, 0, 0, 0, 0), UntaggedHeaderLen)
	require.Equal(t, TaggedHeaderLen, HeaderLen(MakeControl(true, false)))
	require.Equal(t, UntaggedHeaderLen, HeaderLen(MakeControl(false, true)))
}

func TestControl_RFC5041_4_1(t *testing.T) {
	for _, tc := range []struct {
		tagged, last bool
		want         byte
	}{
		{false, false, 0x01},
		{false, true, 0x41},
		{true, false, 0x81},
		{true, true, 0xc1},
	} {
		c := MakeControl(tc.tagged, tc.last)
		require.Equal(t, tc.want, byte(c))
		require.Equal(t, tc.tagged, c.Tagged())
		require.Equal(t, tc.last, c.Last())
		require.Equal(t, uint8(1), c.Version())
		require.Zero(t, c.Reserved())
	}
	c := Control(0xfe) // T, L, all reserved bits, DV 2
	require.True(t, c.Tagged())
	require.True(t, c.Last())
	require.Equal(t, uint8(0x0f), c.Reserved())
	require.Equal(t, uint8(2), c.Version())
}

// The byte strings are the DDP headers (after the MPA length) of FPDUs that
// Linux siw sent (internal/capture/testdata) or that follow its header
// layouts: the RTR of siw_qp_mpa_rts() and the iwarp_pktinfo[] templates
// in siw_qp.c.
func TestTagged_RFC5041_4_Bytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wire    string
		ctrl    Control
		rsvdULP byte
		stag    uint32
		to      uint64
	}{
		{"zero-length Write RTR", "c1 40 00000001 0000000000000000", 0xc1, 0x40, 1, 0},
		{"Read Response", "c1 42 3e739b00 0000564f606d5550", 0xc1, 0x42, 0x3e739b00, 0x564f606d5550},
		{"Write, not last", "81 40 00002222 0000000000002000", 0x81, 0x40, 0x2222, 0x2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := testutil.Unhex(t, tc.wire)
			require.Equal(t, wire, AppendTagged(nil, tc.ctrl, tc.rsvdULP, tc.stag, tc.to))
			h, ok := ParseTagged(append(wire, 0xaa, 0xbb)) // payload bytes follow
			require.True(t, ok)
			require.Len(t, h, TaggedHeaderLen)
			require.Equal(t, tc.ctrl, h.Control())
			require.Equal(t, tc.rsvdULP, h.RsvdULP())
			require.Equal(t, tc.stag, h.STag())
			require.Equal(t, tc.to, h.TO())
		})
	}
}

func TestUntagged_RFC5041_4_Bytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		wire        string
		ctrl        Control
		rsvdULP     byte
		word        uint32
		qn, msn, mo uint32
	}{
		{"Send MSN 1", "41 43 00000000 00000000 00000001 00000000", 0x41, 0x43, 0, 0, 1, 0},
		{"Read Request MSN 1", "41 41 00000000 00000001 00000001 00000000", 0x41, 0x41, 0, 1, 1, 0},
		{"Terminate", "41 47 00000000 00000002 00000001 00000000", 0x41, 0x47, 0, 2, 1, 0},
		{"Send with Invalidate, middle segment", "01 44 12345678 00000000 00000007 000005a0", 0x01, 0x44, 0x12345678, 0, 7, 1440},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := testutil.Unhex(t, tc.wire)
			require.Equal(t, wire, AppendUntagged(nil, tc.ctrl, tc.rsvdULP, tc.word, tc.qn, tc.msn, tc.mo))
			h, ok := ParseUntagged(wire)
			require.True(t, ok)
			require.Equal(t, tc.ctrl, h.Control())
			require.Equal(t, tc.rsvdULP, h.RsvdULP())
			require.Equal(t, tc.word, h.RsvdULPWord())
			require.Equal(t, tc.qn, h.QN())
			require.Equal(t, tc.msn, h.MSN())
			require.Equal(t, tc.mo, h.MO())
		})
	}
}

func TestParse_ShortBuffers(t *testing.T) {
	for n := 0; n < TaggedHeaderLen; n++ {
		_, ok := ParseTagged(make([]byte, n))
		require.False(t, ok, n)
	}
	for n := 0; n < UntaggedHeaderLen; n++ {
		_, ok := ParseUntagged(make([]byte, n))
		require.False(t, ok, n)
	}
}

func TestAppend_KeepsPrefix(t *testing.T) {
	b := AppendTagged([]byte{0xee}, MakeControl(true, true), 0x40, 7, 9)
	require.Equal(t, byte(0xee), b[0])
	h, ok := ParseTagged(b[1:])
	require.True(t, ok)
	require.Equal(t, uint32(7), h.STag())
	require.Equal(t, uint64(9), h.TO())
}
