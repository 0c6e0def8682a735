package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sort"
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/capture"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// outcome is what this package's initiator decides about a captured Reply.
type outcome int

const (
	accepted   outcome = iota
	rejected           // *RejectedError
	refused            // *Error
	noReply            // the responder closed without a Reply
	badRequest         // the Request itself does not parse
)

// goldenFile is what the summary recorded with the captures
// (internal/capture/testdata/pcap-summary.txt) and tshark 4.0.17 report
// for a capture.
type goldenFile struct {
	file string
	// per connection, in capture order: this package's verdict on the
	// exchange (see checkExchange)
	outcomes []outcome
	// ULPDU length -> number of FPDUs, over all streams
	ulpdus map[int]int
	// FPDUs whose CRC field is zero / not zero
	zeroCRC, nonzeroCRC int
	// frames of FPDUs failing a negotiated CRC (tshark: "Bad CRC32")
	badCRC []int
	// frames of FPDUs on CRC-off streams whose CRC field holds junk
	junkCRC []int
}

var goldenFiles = []goldenFile{
	{
		file:     "rping-lo.pcap",
		outcomes: []outcome{accepted},
		ulpdus:   map[int]int{78: 20, 46: 10, 34: 40},
		zeroCRC:  70,
	},
	{
		file:     "rping-mtu1500.pcap",
		outcomes: []outcome{accepted},
		ulpdus:   map[int]int{874: 4, 1442: 20, 46: 2, 34: 8},
		zeroCRC:  34,
	},
	{
		file:     "ib_send_bw.pcap",
		outcomes: []outcome{accepted, accepted},
		ulpdus:   map[int]int{18: 4, 20: 2, 22: 4, 34: 2, 74: 14, 4114: 20},
		zeroCRC:  46,
	},
	{
		file:     "ib_write_bw.pcap",
		outcomes: []outcome{accepted, accepted},
		ulpdus:   map[int]int{4110: 20, 20: 2, 22: 4, 26: 10, 34: 2, 74: 14},
		zeroCRC:  52,
	},
	{
		// siw is the initiator; the host emulates the responder with a
		// different policy each round (testdata/mpa-guest-client-host.txt). siw
		// closed the connection after the reject (3), the revision-1 reply
		// to its enhanced Request (4) and the reply with M set (5); this
		// package's initiator refuses the same three.
		file: "mpa-guest-client.pcap",
		outcomes: []outcome{accepted, accepted, rejected, refused, refused,
			accepted, accepted, accepted, accepted},
		ulpdus:     map[int]int{14: 1, 78: 10, 4014: 2, 46: 6, 834: 1, 1450: 5, 34: 24},
		zeroCRC:    22,
		nonzeroCRC: 27,
	},
	{
		// The host is the initiator; siw responds (testdata/mpa-host-client-host.txt).
		// Round 9's Request is enhanced but too short for the IRD/ORD block,
		// round 10 has revision 3 and round 11 a wrong key; siw rejected
		// markers (7) and, with mpa_crc_strict, a Request with C (14).
		file: "mpa-host-client.pcap",
		outcomes: []outcome{accepted, accepted, accepted, accepted, accepted, accepted,
			rejected, accepted, badRequest, badRequest, badRequest, accepted,
			accepted, rejected, accepted, accepted, accepted, accepted, accepted,
			accepted, accepted},
		ulpdus:     map[int]int{14: 2, 78: 9, 46: 5, 34: 19, 22: 1, 38: 1},
		zeroCRC:    16,
		nonzeroCRC: 21,
		badCRC:     []int{241},           // round 20: the host's Send with a corrupted CRC
		junkCRC:    []int{223, 225, 227}, // round 19: 0xdeadbeef in CRC fields, CRC off
	},
}

// initiatorConfig describes an initiator that sent req, the way siw or the
// host script configured it.
func initiatorConfig(req *Frame) *Config {
	c := &Config{Revision: req.Rev, CRC: CRCOff, RefuseMarkers: req.Flags&FlagMarkers == 0,
		RequestMarkers: req.Flags&FlagMarkers != 0, PeerIsIwarpGo: true}
	if req.Flags&FlagCRC != 0 {
		c.CRC = CRCPreferred
	}
	if req.Rev == 2 && !req.Enhanced() {
		c.NoEnhanced = true
	}
	if req.HasIRDORD {
		pow2 := func(v uint16) uint16 {
			p := uint16(1)
			for p < v && p < MaxAdvertisedIRDORD {
				p <<= 1
			}
			if v == 0 {
				return 0
			}
			return p
		}
		c.IRD, c.ORD = pow2(req.IRDORD.IRD), pow2(req.IRDORD.ORD)
		c.P2P, c.RTR = req.IRDORD.P2P, req.IRDORD.RTR
	}
	return c
}

type streamFPDU struct {
	frame    int
	ulpdu    int
	crcField []byte
	crcErr   error
}

// readFPDUs frames data with the Reader and, independently, by walking
// length fields; both must agree on every boundary.
func readFPDUs(t *testing.T, st *capture.Stream, off int, crc bool) []streamFPDU {
	t.Helper()
	data := st.Data[off:]
	// Captures are decoded past CRC errors, to check every FPDU.
	r := NewReader(iotestHalf(bytes.NewReader(data)), ReaderConfig{CRC: crc, ContinueAfterCRCError: true})
	var out []streamFPDU
	pos := 0
	for {
		n, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, int(binary.BigEndian.Uint16(data[pos:])), n)
		end := pos + FPDULen(n)
		require.LessOrEqual(t, end, len(data), "FPDU at stream offset %d runs past the stream", off+pos)
		f := streamFPDU{frame: st.FrameAt(off + pos), ulpdu: n, crcField: data[end-crcLen : end]}
		f.crcErr = r.End()
		if f.crcErr != nil {
			require.ErrorIs(t, f.crcErr, ErrCRC)
			require.Equal(t, termcode.Code(0x2002), f.crcErr.(*Error).Code)
		}
		out = append(out, f)
		pos = end
	}
	require.Equal(t, len(data), pos, "the stream ends on an FPDU boundary")
	return out
}

func iotestHalf(r io.Reader) io.Reader { return &halfReader{r} }

// halfReader returns half of what is asked for, so FPDUs cross reads.
type halfReader struct{ r io.Reader }

func (h *halfReader) Read(p []byte) (int, error) { return h.r.Read(p[:(len(p)+1)/2]) }

// checkExchange parses the Request and Reply of c, re-encodes them, and
// runs this package's initiator logic (configured like the captured
// initiator) on the Reply. It returns the verdict, whether CRC is in use and
// where the FPDU streams start.
func checkExchange(t *testing.T, c *capture.Conn) (outcome, bool, int, int) {
	t.Helper()
	req, n, err := ParseFrame(c.Up.Data)
	if err != nil {
		var pe *Error
		require.ErrorAs(t, err, &pe)
		return badRequest, false, len(c.Up.Data), len(c.Down.Data)
	}
	enc, err := AppendFrame(nil, &req)
	require.NoError(t, err)
	require.Equal(t, c.Up.Data[:n], enc, "Request re-encodes to the captured bytes")
	if len(c.Down.Data) == 0 {
		return noReply, false, n, 0
	}
	rep, m, err := ParseFrame(c.Down.Data)
	require.NoError(t, err)
	enc, err = AppendFrame(nil, &rep)
	require.NoError(t, err)
	require.Equal(t, c.Down.Data[:m], enc, "Reply re-encodes to the captured bytes")

	res, err := CheckReply(initiatorConfig(&req), &req, &rep)
	var re *RejectedError
	var pe *Error
	switch {
	case err == nil:
		// The captured peers ran with the Reply's C (siw follows it as
		// initiator and copies the Request's C as responder); the
		// either-side rule must come to the same verdict on every
		// captured FPDU stream.
		return accepted, res.CRC, n, m
	case errors.As(err, &re):
		return rejected, false, n, m
	case errors.As(err, &pe):
		return refused, rep.Flags&FlagCRC != 0, n, m
	}
	t.Fatalf("unexpected error %v", err)
	return 0, false, 0, 0
}

func TestGolden_SiwCaptures(t *testing.T) {
	for _, g := range goldenFiles {
		t.Run(g.file, func(t *testing.T) {
			conns, err := capture.ReadFile(testutil.CapturePath(t, g.file))
			require.NoError(t, err)
			require.Len(t, conns, len(g.outcomes))
			ulpdus := map[int]int{}
			var zero, nonzero int
			var badCRC, junkCRC []int
			for i, c := range conns {
				got, crc, upOff, downOff := checkExchange(t, c)
				require.Equal(t, g.outcomes[i], got, "connection %d (port %d)", i+1, c.Client.Port())
				if got == badRequest || got == noReply {
					require.Len(t, c.Up.Data, upOff, "nothing follows a refused Request")
					continue
				}
				for _, s := range []struct {
					st  *capture.Stream
					off int
				}{{c.Up, upOff}, {c.Down, downOff}} {
					for _, f := range readFPDUs(t, s.st, s.off, crc) {
						ulpdus[f.ulpdu]++
						if bytes.Equal(f.crcField, []byte{0, 0, 0, 0}) {
							zero++
						} else {
							nonzero++
							if !crc {
								junkCRC = append(junkCRC, f.frame)
								require.Equal(t, []byte{0xde, 0xad, 0xbe, 0xef}, f.crcField, "frame %d", f.frame)
							}
						}
						if f.crcErr != nil {
							badCRC = append(badCRC, f.frame)
						}
					}
				}
			}
			sort.Ints(badCRC)
			sort.Ints(junkCRC)
			require.Equal(t, g.ulpdus, ulpdus, "FPDUs by ULPDU length")
			require.Equal(t, g.zeroCRC, zero, "FPDUs with a zero CRC field")
			require.Equal(t, g.nonzeroCRC, nonzero, "FPDUs with a non-zero CRC field")
			require.Equal(t, g.badCRC, badCRC, "frames failing the negotiated CRC")
			require.Equal(t, g.junkCRC, junkCRC, "frames with junk in an unused CRC field")
		})
	}
}
