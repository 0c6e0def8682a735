package rdmap

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/stretchr/testify/require"
)

const termHdr = "41 47 00000000 00000002 00000001 00000000"

func TestAppendTerminate_RFC5040_4_Layout(t *testing.T) {
	send := AppendSend(nil, OpSend, true, 0, 1, 0)
	write := AppendWrite(nil, true, 0x2222, 0x2000)
	rrBody := AppendReadRequestBody(nil, ReadRequestFields{SinkSTag: 1, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000})
	rrHdr := AppendReadRequest(nil, 3, ReadRequestFields{SinkSTag: 1, Size: 64, SrcSTag: 0x1111, SrcTO: 0x1000})

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		// RFC-layout bytes: Wireshark reads the control word with the same
		// masks (epan/dissectors/packet-iwarp-ddp-rdmap.c: IWARP_LAYER 0xF0,
		// IWARP_ETYPE 0x0F, IWARP_HDRCT_M/D/R 0x80/0x40/0x20).
		{"MPA CRC, nothing attached", errMPALike, termHdr + "20020000"},
		{"DDP no buffer with a zero-length Send's header",
			ddp.NewError(termcode.DDPUntaggedNoBuffer, send, 18),
			termHdr + "1202c000 0012" + "4143 00000000 00000000 00000001 00000000"},
		{"RDMAP cannot invalidate", NewError(SendInvCannotInvalidate, send, 18, nil),
			termHdr + "0209c000 0012" + "4143 00000000 00000000 00000001 00000000"},
		{"tagged invalid STag", ddp.NewError(termcode.DDPTaggedInvalidSTag, write, 78),
			termHdr + "1100c000 004e" + "c140 00002222 0000000000002000"},
		{"Read Request source bounds: M, D, R", NewError(ReadReqSourceBaseBounds, rrHdr, 46, rrBody),
			termHdr + "0101e000 002e" + fmt.Sprintf("%x", rrHdr)},
		// RFC 5040 §4.8 Figure 10: version errors carry the DDP header too.
		{"DDP version: M, D", ddp.NewError(termcode.DDPUntaggedVersion, send, 18),
			termHdr + "1206c000 0012" + "4143 00000000 00000000 00000001 00000000"},
		{"RDMAP version: M, D", NewError(RDMAPVersion, send, 18, nil),
			termHdr + "0205c000 0012" + "4143 00000000 00000000 00000001 00000000"},
		// §4.8: "The DDP Header is not present if the Terminate Error Type
		// is a Local Catastrophic Error".
		{"DDP local catastrophic: nothing", ddp.NewError(termcode.DDPLocalCatastrophic, send, 18), termHdr + "10000000"},
		{"local catastrophic: nothing", NewError(RDMAPLocalCatastrophic, send, 18, nil), termHdr + "00000000"},
		{"error without a code", errors.New("disk on fire"), termHdr + "00000000"},
		{"truncated header: nothing", ddp.NewError(termcode.DDPLocalCatastrophic, send[:9], 9), termHdr + "10000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			term := NewTerminate(tc.err)
			got := AppendTerminate(nil, &term)
			require.Equal(t, testutil.Unhex(t, tc.want), got)
			require.Equal(t, len(got), term.Len())
		})
	}
}

func TestAppendTerminate_Sizes(t *testing.T) {
	hdr14, hdr18, rr := make([]byte, 14), make([]byte, 18), make([]byte, 28)
	hdr14[0], hdr18[0] = 0xc1, 0x41
	for _, tc := range []struct {
		t    Terminate
		want int
	}{
		{Terminate{}, 22},
		{Terminate{HasSegmentLen: true, DDPHeader: hdr14}, 38},
		{Terminate{HasSegmentLen: true, DDPHeader: hdr18}, 42},
		{Terminate{HasSegmentLen: true, DDPHeader: hdr18, RDMAHeader: rr}, 70},
	} {
		b := AppendTerminate(nil, &tc.t)
		require.Len(t, b, tc.want)
		require.Equal(t, tc.want, tc.t.Len())
		require.Zero(t, (2+len(b))%4, "no pad needed")
	}
	require.Equal(t, 70, MaxTerminateLen)
}

func TestAppendTerminate_RoundTrip(t *testing.T) {
	send := AppendSend(nil, OpSendInvalidate, true, 5, 9, 0)
	for _, code := range []termcode.Code{termcode.MPACRC, termcode.DDPUntaggedNoBuffer, termcode.RDMAPUnexpectedOpcode, termcode.RDMAPInvalidSTag, termcode.RDMAPLocalCatastrophic, termcode.MPANoMatchingRTR} {
		in := Terminate{Code: code, HasSegmentLen: true, SegmentLen: 34, DDPHeader: send}
		b := AppendTerminate(nil, &in)
		rt, err := ParseTerminate(b)
		require.NoError(t, err)
		require.True(t, rt.Conforming())
		require.Equal(t, LayoutRFC, rt.Layout, code.String())
		require.Equal(t, code, rt.Code())
		require.True(t, rt.RFC.M && rt.RFC.D && !rt.RFC.R)
		require.Equal(t, uint16(34), rt.SegmentLen)
		require.Equal(t, send, rt.DDPHeader)
		require.Nil(t, rt.RDMAHeader)
		require.Nil(t, rt.Trailing)
		require.Equal(t, b, rt.Append(nil))
	}
}

// siwTerminate builds the ULPDU siw would send: its header, then the
// control word and attachments as given.
func siwTerminate(t *testing.T, rest string) []byte { return testutil.Unhex(t, termHdr+rest) }

func TestParseTerminate_SIWLayout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       []byte
		layout  Layout
		code    termcode.Code
		m, d, r bool
		segLen  uint16
		ddpLen  int
		hasRR   bool
		rfcCode termcode.Code
	}{
		// Captured from siw (mpa-host-client.pcap, rounds 20 and 21 of
		// internal/capture/testdata/mpa-host-client-host.txt).
		{"captured CRC error", siwTerminate(t, "02020000"), LayoutSIW, termcode.MPACRC, false, false, false, 0, 0, false, 0x0202},
		{"captured invalid STag on a Read Response", siwTerminate(t, "11000300 0040 c142 3e739b00 0000564f606d5550"),
			LayoutSIW, termcode.DDPTaggedInvalidSTag, true, true, false, 64, 14, false, 0x1100},
		// Words siw's struct iwarp_terminate (iwarp.h) gives on x86-64: its
		// __LITTLE_ENDIAN_BITFIELD order is layer:4, etype:4, ecode:8,
		// flag_m, flag_d, flag_r, and bit-fields fill from the least
		// significant bit there.
		{"untagged no buffer, M, D", siwTerminate(t, "21020300 0010 4143 00000000 00000000 00000001 00000000"),
			LayoutSIW, termcode.DDPUntaggedNoBuffer, true, true, false, 16, 18, false, 0x2102},
		{"access rights on a Read Request, M, D, R", siwTerminate(t, "10020700 0000 4141 00000000 00000001 00000001 00000000"+
			"00000001 0000000000000000 00000040 00001111 0000000000001000"),
			LayoutSIW, termcode.RDMAPAccessRights, true, true, true, 0, 18, true, 0x1002},
		{"Send-with-Invalidate PD mismatch: R set, no RDMAP header", siwTerminate(t, "10090700 0000 4144 00000099 00000000 00000001 00000000"),
			LayoutSIW, termcode.RDMAPProtCannotInvalidate, true, true, true, 0, 18, false, 0x1009},
		{"local catastrophic 0xFF", siwTerminate(t, "00ff0000"), LayoutRFC, 0x00ff, false, false, false, 0, 0, false, 0x00ff},
		// RFC layout.
		{"RFC MPA CRC", siwTerminate(t, "20020000"), LayoutRFC, termcode.MPACRC, false, false, false, 0, 0, false, termcode.MPACRC},
		{"RFC no buffer, M, D", siwTerminate(t, "1202c000 0012 4143 00000000 00000000 00000001 00000000"),
			LayoutRFC, termcode.DDPUntaggedNoBuffer, true, true, false, 18, 18, false, termcode.DDPUntaggedNoBuffer},
		{"RFC cannot invalidate", siwTerminate(t, "02090000"), LayoutRFC, termcode.RDMAPOpCannotInvalidate, false, false, false, 0, 0, false, termcode.RDMAPOpCannotInvalidate},
		{"hardware MPA CRC, type 3", siwTerminate(t, "23020000"), LayoutRFC, 0x2302, false, false, false, 0, 0, false, 0x2302},
		// Both readings known and equal nibbles: the flag bits decide.
		{"equal nibbles, RFC flags", siwTerminate(t, "1100c000 0040 c142 3e739b00 0000564f606d5550"),
			LayoutRFC, termcode.DDPTaggedInvalidSTag, true, true, false, 64, 14, false, 0x1100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := ParseTerminate(tc.b)
			require.NoError(t, err)
			require.True(t, rt.Conforming())
			require.Equal(t, tc.layout, rt.Layout)
			require.Equal(t, tc.code, rt.Code())
			require.Equal(t, tc.rfcCode, rt.RFC.Code, "the RFC reading is always kept")
			rd := rt.Chosen()
			require.Equal(t, [3]bool{tc.m, tc.d, tc.r}, [3]bool{rd.M, rd.D, rd.R})
			require.Equal(t, tc.segLen, rt.SegmentLen)
			require.Equal(t, tc.m || tc.d, rt.SegmentLenPresent)
			require.Len(t, rt.DDPHeader, tc.ddpLen)
			require.Equal(t, tc.hasRR, rt.RDMAHeader != nil)
			require.Empty(t, rt.Trailing)
			require.Equal(t, tc.b, rt.Append(nil), "re-encodes to the same bytes")
		})
	}
}

func TestParseTerminate_BothReadings(t *testing.T) {
	rt, err := ParseTerminate(siwTerminate(t, "21020300"))
	require.NoError(t, err)
	require.Equal(t, [4]byte{0x21, 0x02, 0x03, 0x00}, rt.Control)
	require.Equal(t, Reading{Code: 0x2102, Reserved: 0x0300}, rt.RFC)
	require.Equal(t, Reading{Code: 0x1202, M: true, D: true}, rt.SIW)
	require.Equal(t, LayoutSIW, rt.Layout)
	require.Equal(t, rt.SIW, rt.Chosen())
}

func TestParseTerminate_NeverPastTheULPDU(t *testing.T) {
	// D set but the header is cut short by the ULPDU end.
	rt, err := ParseTerminate(siwTerminate(t, "1202c000 0012 4143 0000"))
	require.NoError(t, err)
	require.Len(t, rt.DDPHeader, 4)
	// Flags promise everything, nothing follows.
	rt, err = ParseTerminate(siwTerminate(t, "0100e000"))
	require.NoError(t, err)
	require.False(t, rt.SegmentLenPresent)
	require.Nil(t, rt.DDPHeader)
	require.Nil(t, rt.RDMAHeader)
	// Extra bytes the flags do not account for are kept, not interpreted.
	b := siwTerminate(t, "20020000 deadbeef")
	rt, err = ParseTerminate(b)
	require.NoError(t, err)
	require.Equal(t, testutil.Unhex(t, "deadbeef"), rt.Trailing)
	require.Equal(t, b, rt.Append(nil))
}

func TestParseTerminate_Rejects(t *testing.T) {
	_, err := ParseTerminate(siwTerminate(t, "2002")) // 20 bytes
	require.ErrorIs(t, err, SegmentTooShort)
	_, err = ParseTerminate(testutil.Unhex(t, "41 43 00000000 00000002 00000001 00000000 20020000"))
	require.ErrorIs(t, err, UnexpectedOpcode)
	_, err = ParseTerminate(testutil.Unhex(t, "c1 47 00000000 00000002 00000001 00000000 20020000"))
	require.ErrorIs(t, err, UnexpectedOpcode)
}

func TestParseTerminate_NonConforming(t *testing.T) {
	for _, hdr := range []string{
		"01 47 00000000 00000002 00000001 00000000", // L clear
		"41 47 00000000 00000000 00000001 00000000", // QN 0
		"41 47 00000000 00000002 00000002 00000000", // MSN 2
		"41 47 00000000 00000002 00000001 00000004", // MO 4
	} {
		rt, err := ParseTerminate(testutil.Unhex(t, hdr+"20020000"))
		require.NoError(t, err)
		require.False(t, rt.Conforming(), hdr)
		require.Equal(t, termcode.MPACRC, rt.Code())
	}
}

func TestTerminateError_Remote(t *testing.T) {
	b := siwTerminate(t, "11000300 0040 c142 3e739b00 0000564f606d5550")
	rt, err := ParseTerminate(b)
	require.NoError(t, err)
	te := rt.Err()
	b[30] = 0xff // the error keeps its own copy
	require.True(t, te.Remote)
	require.Equal(t, termcode.DDPTaggedInvalidSTag, te.Code)
	require.Equal(t, testutil.Unhex(t, "c142 3e739b00 0000564f606d5550"), te.Terminate.DDPHeader)
	require.True(t, te.Terminate.HasSegmentLen)
	require.Equal(t, uint16(64), te.Terminate.SegmentLen)
	require.Equal(t, LayoutSIW, te.Received.Layout)
	require.Contains(t, te.Error(), "peer sent Terminate")
	require.Contains(t, te.Error(), "siw")

	var err2 error = fmt.Errorf("qp: %w", te)
	require.ErrorIs(t, err2, net.ErrClosed)
	require.ErrorIs(t, err2, &TerminateError{Remote: true, Code: termcode.DDPTaggedInvalidSTag})
	require.NotErrorIs(t, err2, &TerminateError{Remote: false, Code: termcode.DDPTaggedInvalidSTag})
	require.NotErrorIs(t, err2, &TerminateError{Remote: true, Code: termcode.DDPTaggedBaseBounds})
	var got *TerminateError
	require.ErrorAs(t, err2, &got)
	require.Same(t, te, got)
	// The peer's code is in the chain like any other layer's; te.Remote is
	// what tells a received Terminate from one to send.
	c, ok := termcode.Of(err2)
	require.True(t, ok)
	require.Equal(t, termcode.DDPTaggedInvalidSTag, c)
}

func TestTerminateError_Local(t *testing.T) {
	cause := ddp.NewError(termcode.DDPUntaggedNoBuffer, AppendSend(nil, OpSend, true, 0, 1, 0), 34)
	te := LocalTerminateError(cause)
	require.False(t, te.Remote)
	require.Equal(t, termcode.DDPUntaggedNoBuffer, te.Code)
	require.Nil(t, te.Received)
	require.ErrorIs(t, te, net.ErrClosed)
	require.ErrorIs(t, te, termcode.DDPUntaggedNoBuffer, "the cause is reachable")
	require.ErrorIs(t, te, &TerminateError{Code: termcode.DDPUntaggedNoBuffer})
	m, d, r := te.Terminate.Flags()
	require.True(t, m && d && !r)
	require.Contains(t, te.Error(), "sending Terminate", "not sent yet")
	sent, failed := *te, *te
	sent.Delivery = DeliverySent
	failed.Delivery, failed.DeliveryErr = DeliveryFailed, errors.New("peer stopped reading")
	require.Contains(t, sent.Error(), "sent Terminate")
	require.Contains(t, failed.Error(), "Terminate not sent (peer stopped reading)")
	require.ErrorIs(t, &failed, te, "delivery does not change what the Terminate is")
	require.Same(t, te, LocalTerminateError(fmt.Errorf("wrapped: %w", te)))

	plain := LocalTerminateError(errors.New("boom"))
	require.Equal(t, termcode.RDMAPLocalCatastrophic, plain.Code)
	require.ErrorIs(t, plain, net.ErrClosed)

	mpa := LocalTerminateError(errMPALike)
	require.Equal(t, termcode.MPACRC, mpa.Code)
	require.Empty(t, mpa.Terminate.DDPHeader)
}

func TestRDMAPError_Is(t *testing.T) {
	e := NewError(ReadReqIRDExceeded, AppendReadRequest(nil, 2, ReadRequestFields{}), 46, nil)
	require.ErrorIs(t, e, ReadReqIRDExceeded)
	require.ErrorIs(t, e, &Error{Cond: ReadReqIRDExceeded})
	require.NotErrorIs(t, e, ReadReqMalformed)
	require.NotErrorIs(t, e, errors.New("x"))
	require.Equal(t, termcode.Code(0x1202), e.Code(), "RFC 5040 §5.2.2: the IRD counts Untagged Buffers of QN 1")
	c, ok := termcode.Of(e)
	require.True(t, ok)
	require.Equal(t, termcode.DDPUntaggedNoBuffer, c)
	require.Len(t, e.DDPHeader(), 18)
	require.Nil(t, e.RDMAHeader())
	require.Contains(t, e.Error(), "ReadReqIRDExceeded")
	require.Contains(t, e.Error(), "no buffer available")
	require.Contains(t, ReadReqIRDExceeded.Error(), "ReadReqIRDExceeded")
	require.Equal(t, "rdmap: ReadReqIRDExceeded: DDP Untagged Buffer Error: Invalid MSN - no buffer available (1/2/0x02), segment length 46", e.Error())
}
