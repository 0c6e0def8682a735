package mpa

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

const (
	reqKeyHex = "4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65"
	repKeyHex = "4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65"
)

// Frames copied from the byte dumps in the logs recorded with the siw
// captures (internal/capture/testdata/mpa-*-host.txt).
var goldenFrames = []struct {
	name string
	hex  string
	want Frame
}{
	{"rping request rev2 E IRD=ORD=1", reqKeyHex + "10 02 00 04 00 01 00 01",
		Frame{Kind: KindRequest, Flags: FlagEnhanced, Rev: 2, HasIRDORD: true, IRDORD: IRDORD{IRD: 1, ORD: 1}}},
	{"rev1 request, no CRC", reqKeyHex + "00 01 00 00",
		Frame{Kind: KindRequest, Rev: 1}},
	{"rev1 reply with CRC", repKeyHex + "40 01 00 00",
		Frame{Kind: KindReply, Flags: FlagCRC, Rev: 1}},
	{"siw reply IRD=2 ORD=8", repKeyHex + "10 02 00 04 00 02 00 08",
		Frame{Kind: KindReply, Flags: FlagEnhanced, Rev: 2, HasIRDORD: true, IRDORD: IRDORD{IRD: 2, ORD: 8}}},
	{"P2P request offering every RTR, CRC", reqKeyHex + "50 02 00 04 c0 10 c0 10",
		Frame{Kind: KindRequest, Flags: FlagCRC | FlagEnhanced, Rev: 2, HasIRDORD: true,
			IRDORD: IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: RTRSend | RTRWrite | RTRRead}}},
	{"siw P2P reply choosing Write", repKeyHex + "50 02 00 04 80 10 80 10",
		Frame{Kind: KindReply, Flags: FlagCRC | FlagEnhanced, Rev: 2, HasIRDORD: true,
			IRDORD: IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: RTRWrite}}},
	{"markers request", reqKeyHex + "90 02 00 04 00 01 00 01",
		Frame{Kind: KindRequest, Flags: FlagMarkers | FlagEnhanced, Rev: 2, HasIRDORD: true, IRDORD: IRDORD{IRD: 1, ORD: 1}}},
	{"siw reject of markers, zero block", repKeyHex + "30 02 00 04 00 00 00 00",
		Frame{Kind: KindReply, Flags: FlagReject | FlagEnhanced, Rev: 2, HasIRDORD: true}},
	{"siw reject of a short enhanced request, no block", repKeyHex + "30 02 00 00",
		Frame{Kind: KindReply, Flags: FlagReject | FlagEnhanced, Rev: 2}},
	{"reject with private data", repKeyHex + "30 02 00 0f 00 01 00 01 68 6f 73 74 2d 72 65 6a 65 63 74",
		Frame{Kind: KindReply, Flags: FlagReject | FlagEnhanced, Rev: 2, HasIRDORD: true,
			IRDORD: IRDORD{IRD: 1, ORD: 1}, PrivateData: []byte("host-reject")}},
	{"rev1 request with private data", reqKeyHex + "00 01 00 05 68 65 6c 6c 6f",
		Frame{Kind: KindRequest, Rev: 1, PrivateData: []byte("hello")}},
	{"rev2 without E", reqKeyHex + "00 02 00 00",
		Frame{Kind: KindRequest, Rev: 2}},
}

func TestFrame_RFC5044_7_1_GoldenBytes(t *testing.T) {
	for _, tc := range goldenFrames {
		t.Run(tc.name, func(t *testing.T) {
			b := testutil.Unhex(t, tc.hex)
			f, n, err := ParseFrame(b)
			require.NoError(t, err)
			require.Equal(t, len(b), n)
			if tc.want.PrivateData == nil {
				require.Empty(t, f.PrivateData)
				f.PrivateData = nil
			}
			require.Equal(t, tc.want, f)
			out, err := AppendFrame(nil, &f)
			require.NoError(t, err)
			require.Equal(t, b, out, "encode(parse(b)) == b")

			rf, err := ReadFrame(bytes.NewReader(b), MaxPrivateData)
			require.NoError(t, err)
			if tc.want.PrivateData == nil {
				rf.PrivateData = nil
			}
			require.Equal(t, tc.want, rf)
		})
	}
}

func TestHeader_View(t *testing.T) {
	h := Header(testutil.Unhex(t, reqKeyHex+"d9 02 01 02"))
	require.Equal(t, RequestKey, string(h.Key()))
	require.Equal(t, KindRequest, h.Kind())
	require.Equal(t, FlagMarkers|FlagCRC|FlagEnhanced|0x09, h.Flags())
	require.Equal(t, uint8(2), h.Rev())
	require.Equal(t, 258, h.PDLength())
	require.Equal(t, "M|C|E|res=0x09", h.Flags().String())
	require.Equal(t, Kind(0), Header(testutil.Unhex(t, "00000000000000000000000000000000 00 01 00 00")).Kind())
}

// Reserved flag bits are kept as received (siw echoes them; the parser
// must not lose them).
func TestFrame_RFC5044_7_1_ReservedBitsRoundTrip(t *testing.T) {
	b := testutil.Unhex(t, repKeyHex+"1f 02 00 04 00 01 00 01")
	f, _, err := ParseFrame(b)
	require.NoError(t, err)
	require.Equal(t, Flags(0x0f), f.Flags&FlagsReserved)
	out, err := AppendFrame(nil, &f)
	require.NoError(t, err)
	require.Equal(t, b, out)
}

func TestParseFrame_Malformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		hex  string
		want error
	}{
		{"bad key", "4d 50 41 20 49 44 20 42 61 64 20 46 72 61 6d 65 00 01 00 00", ErrBadKey},
		{"revision 3", reqKeyHex + "00 03 00 00", ErrRevision},
		{"PD_Length 513", reqKeyHex + "00 01 02 01" + strings.Repeat("00", 513), ErrPrivateDataLength},
		{"short header", reqKeyHex + "00 01", ErrTruncated},
		{"short private data", reqKeyHex + "00 01 00 05 68 65", ErrTruncated},
		{"enhanced, PD_Length 2", reqKeyHex + "10 02 00 02 00 01", ErrShortEnhanced},
		{"enhanced, PD_Length 0", repKeyHex + "10 02 00 00", ErrShortEnhanced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFrame(testutil.Unhex(t, tc.hex))
			require.ErrorIs(t, err, tc.want)
			var pe *Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, termcode.MPAInvalidFrame, pe.Code)
			require.Equal(t, termcode.Code(0x2004), pe.Code)
		})
	}
}

// Revision 1 frames carry no IRD/ORD block even when bit 0x10 is set: the
// Enhanced flag only exists in revision 2.
func TestFrame_RFC6581_BlockOnlyInRev2(t *testing.T) {
	f, _, err := ParseFrame(testutil.Unhex(t, reqKeyHex+"10 01 00 04 00 01 00 01"))
	require.NoError(t, err)
	require.False(t, f.HasIRDORD)
	require.Equal(t, []byte{0, 1, 0, 1}, f.PrivateData)
}

// countingReader records how many bytes were taken from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadFrame_NeverReadsPastFrame(t *testing.T) {
	frame := testutil.Unhex(t, repKeyHex+"10 02 00 09 00 01 00 01 68 65 6c 6c 6f")
	fpdu := testutil.Unhex(t, "00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00")
	for _, wrap := range []struct {
		name string
		f    func(io.Reader) io.Reader
	}{{"plain", func(r io.Reader) io.Reader { return r }}, {"one byte", iotest.OneByteReader}, {"half", iotest.HalfReader}} {
		t.Run(wrap.name, func(t *testing.T) {
			cr := &countingReader{r: bytes.NewReader(append(bytes.Clone(frame), fpdu...))}
			f, err := ReadFrame(wrap.f(cr), MaxPrivateData)
			require.NoError(t, err)
			require.Equal(t, "hello", string(f.PrivateData))
			require.Equal(t, len(frame), cr.n)
			rest, err := io.ReadAll(cr.r)
			require.NoError(t, err)
			require.Equal(t, fpdu, rest)
		})
	}
}

// The limit is applied to PD_Length before any private data is read, so a
// peer cannot make the reader allocate or wait for more than it allows.
func TestReadFrame_LimitCheckedBeforeReading(t *testing.T) {
	hdr := testutil.Unhex(t, reqKeyHex+"10 02 01 2c") // PD_Length 300
	cr := &countingReader{r: bytes.NewReader(hdr)}
	_, err := ReadFrame(cr, SiwMaxPDLength)
	require.ErrorIs(t, err, ErrPrivateDataLength)
	require.Equal(t, FrameHeaderLen, cr.n)
}

func TestReadFrame_TornIsConnectionLost(t *testing.T) {
	for _, n := range []int{0, 7, 20, 22} {
		b := testutil.Unhex(t, reqKeyHex+"10 02 00 04 00 01 00 01")[:n]
		_, err := ReadFrame(bytes.NewReader(b), MaxPrivateData)
		require.ErrorIs(t, err, ErrConnectionLost, "cut at %d", n)
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, termcode.Code(0x2001), pe.Code)
	}
	// Other I/O errors are passed through, not turned into protocol errors.
	boom := errors.New("boom")
	_, err := ReadFrame(iotest.ErrReader(boom), MaxPrivateData)
	require.ErrorIs(t, err, boom)
	var pe *Error
	require.False(t, errors.As(err, &pe))
}

func TestAppendFrame_RefusesWhatItNeverSends(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Frame
		want error
	}{
		{"no kind", Frame{Rev: 1}, ErrConfig},
		{"block without E", Frame{Kind: KindRequest, Rev: 2, HasIRDORD: true}, ErrConfig},
		{"block on rev 1", Frame{Kind: KindRequest, Rev: 1, Flags: FlagEnhanced, HasIRDORD: true}, ErrConfig},
		// siw would read a missing block as IRD/ORD (siw_proc_mpareply).
		{"enhanced reply without block", Frame{Kind: KindReply, Rev: 2, Flags: FlagEnhanced}, ErrConfig},
		{"PD_Length 513", Frame{Kind: KindRequest, Rev: 1, PrivateData: make([]byte, 513)}, ErrPrivateDataLength},
		{"PD_Length 513 with block", Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true,
			PrivateData: make([]byte, 509)}, ErrPrivateDataLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AppendFrame(nil, &tc.f)
			require.ErrorIs(t, err, tc.want)
		})
	}
	// The largest legal frame encodes.
	f := Frame{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced, HasIRDORD: true, PrivateData: make([]byte, 508)}
	b, err := AppendFrame(nil, &f)
	require.NoError(t, err)
	require.Len(t, b, FrameHeaderLen+MaxPrivateData)
}

func TestIRDORD_RFC6581_Bits(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want IRDORD
	}{
		{"00 01 00 01", IRDORD{IRD: 1, ORD: 1}},
		{"80 01 c0 01", IRDORD{IRD: 1, ORD: 1, P2P: true, RTR: RTRWrite | RTRRead}},
		{"c0 10 c0 10", IRDORD{IRD: 16, ORD: 16, P2P: true, RTR: RTRSend | RTRWrite | RTRRead}},
		{"3f ff 3f ff", IRDORD{IRD: MaxIRDORD, ORD: MaxIRDORD}},
		{"01 f4 01 f4", IRDORD{IRD: 500, ORD: 500}},
		{"40 00 00 00", IRDORD{RTR: RTRSend}},
	} {
		b := testutil.Unhex(t, tc.hex)
		require.Equal(t, tc.want, IRDORDBlock(b).Decode(), tc.hex)
		require.Equal(t, b, AppendIRDORD(nil, tc.want), tc.hex)
	}
	require.Equal(t, "Write|Read|Send", (RTRSend | RTRWrite | RTRRead).String())
	require.Equal(t, "none", RTR(0).String())
}

func TestErrCode_Strings(t *testing.T) {
	want := map[termcode.Code]string{
		termcode.MPAConnectionLost:    "TCP connection closed, terminated, or lost",
		termcode.MPACRC:               "MPA CRC Error",
		termcode.MPAMarker:            "MPA Marker and ULPDU Length field mismatch",
		termcode.MPAInvalidFrame:      "Invalid MPA Request Frame or MPA Response Frame",
		termcode.MPALocalCatastrophic: "Local catastrophic error",
		termcode.MPAInsufficientIRD:   "Insufficient IRD resources",
		termcode.MPANoMatchingRTR:     "No matching RTR option",
		0x2009:                        "unknown code",
	}
	for c, s := range want {
		require.Contains(t, c.String(), s)
		require.Equal(t, termcode.LLP, c.Layer())
		require.Zero(t, c.EType())
	}
	e := &Error{Code: termcode.MPACRC, Err: ErrCRC, Detail: "FPDU 3"}
	require.Equal(t, "mpa: CRC mismatch: FPDU 3 (LLP MPA Error: MPA CRC Error (2/0/0x02))", e.Error())
	var c termcode.Code
	require.True(t, errors.As(error(e), &c))
	require.Equal(t, termcode.Code(0x2002), c)
	require.ErrorIs(t, e, ErrCRC)
	require.ErrorIs(t, e, termcode.MPACRC)
}

func FuzzParseFrame(f *testing.F) {
	for _, g := range goldenFrames {
		f.Add(testutil.Unhex(f, g.hex))
	}
	for _, fr := range []Frame{
		{Kind: KindRequest, Rev: 2, Flags: FlagEnhanced | FlagCRC, HasIRDORD: true, IRDORD: IRDORD{IRD: 8, ORD: 4, P2P: true, RTR: RTRWrite}, PrivateData: []byte("pd")},
		{Kind: KindReply, Rev: 1, Flags: FlagMarkers, PrivateData: make([]byte, 512)},
	} {
		b, err := AppendFrame(nil, &fr)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := ParseFrame(b)
		rf, rerr := ReadFrame(bytes.NewReader(b), MaxPrivateData)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != termcode.MPAInvalidFrame {
				t.Fatalf("parse error %v is not an invalid-frame *Error", err)
			}
			if rerr == nil {
				t.Fatalf("ReadFrame accepted what ParseFrame refused: %v", err)
			}
			return
		}
		if rerr != nil {
			t.Fatalf("ReadFrame refused what ParseFrame accepted: %v", rerr)
		}
		if n < FrameHeaderLen || n > len(b) || n > FrameHeaderLen+MaxPrivateData {
			t.Fatalf("bad length %d for %d input bytes", n, len(b))
		}
		out, err := AppendFrame(nil, &fr)
		if err != nil {
			t.Fatalf("re-encoding a parsed frame: %v", err)
		}
		if !bytes.Equal(out, b[:n]) {
			t.Fatalf("round trip changed the frame:\n in %x\nout %x", b[:n], out)
		}
		out2, err := AppendFrame(nil, &rf)
		if err != nil || !bytes.Equal(out2, out) {
			t.Fatalf("ReadFrame and ParseFrame disagree: %x vs %x (%v)", out2, out, err)
		}
	})
}
