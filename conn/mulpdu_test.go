package conn

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 5044 §3: "The range of MULPDU values MUST be between 128 octets and
// 64768 octets, inclusive", and with markers the FPDU on the wire (markers
// included) still fits what the size was chosen for (§4.5).
func TestMULPDU_RFC5044_3_Range(t *testing.T) {
	pipe, other := net.Pipe() // no TCP MSS to read
	defer pipe.Close()
	defer other.Close()
	for _, tc := range []struct {
		name     string
		maxFPDU  int
		peerIsGo bool
		markers  bool
		want     int
	}{
		{"iwarp-go peer", 0, true, false, maxMULPDU},
		{"unknown MSS", 0, false, false, maxMULPDU},
		{"smallest option", minFPDU, false, false, 130},
		{"largest option", maxFPDU, false, false, maxMULPDU},
		{"markers, largest", maxFPDU, true, true, 64262},
		{"markers, smallest", minFPDU, false, true, minMULPDU},
		{"1500-byte FPDU", 1500, false, false, 1494},
		{"1500-byte FPDU with markers", 1500, false, true, 1482},
	} {
		cfg := defaultConfig()
		cfg.maxFPDU = tc.maxFPDU
		got := mulpduFor(pipe, &cfg, tc.peerIsGo, tc.markers)
		require.Equal(t, tc.want, got, tc.name)
		require.GreaterOrEqual(t, got, minMULPDU, tc.name)
		require.LessOrEqual(t, got, maxMULPDU, tc.name)
		// The FPDU fits the size asked for, unless the RFC's floor of 128
		// octets wins (§4.5: the MULPDU is never below it).
		if tc.maxFPDU > 0 && got > minMULPDU {
			wire := 2 + got + (4-(2+got)%4)%4 + 4
			if tc.markers {
				wire += 4 * (wire/markerInterval + 1)
			}
			require.LessOrEqual(t, wire, tc.maxFPDU, "%s: the FPDU on the wire fits", tc.name)
		}
	}
	for _, n := range []int{minFPDU - 1, maxFPDU + 1, 64, 65544} {
		_, err := buildConfig(defaultConfig(), []Option{WithMaxFPDU(n)})
		require.ErrorIs(t, err, ErrBadOption, "%d", n)
	}
	_, err := buildConfig(defaultConfig(), []Option{WithMaxFPDU(minFPDU)})
	require.NoError(t, err)
}

// RFC 5044 §4.5: toward a peer that is not iwarp-go, an FPDU fills one TCP
// segment (rounded down to 8, as siw does), unless the MSS read at set-up
// is above half the largest FPDU: then it is Linux's half-window bound on a
// young loopback connection, and the largest FPDU is what fits a segment.
func TestFPDUForMSS_RFC5044_4_5_SegmentSized(t *testing.T) {
	for _, tc := range []struct{ mss, want int }{
		{0, maxFPDU},         // unknown
		{536, 536},           // the IPv4 default
		{1448, 1448},         // Ethernet with timestamps
		{1460, 1456},         // Ethernet without: rounded down to 8
		{8948, 8944},         // 9000-octet jumbo frames
		{maxFPDU / 2, 32384}, // the largest taken as a segment size
		{32768, maxFPDU},     // half of a 64 KiB window, not a segment
		{65483, maxFPDU},     // loopback's own MSS
	} {
		got := fpduForMSS(tc.mss)
		require.Equal(t, tc.want, got, "MSS %d", tc.mss)
		require.LessOrEqual(t, got, maxFPDU, "MSS %d", tc.mss)
		if tc.mss > 0 && tc.mss <= maxFPDU/2 {
			require.LessOrEqual(t, got, tc.mss, "MSS %d: the FPDU fits the segment", tc.mss)
		}
	}
	// The 32768-octet FPDUs the half-window MSS gave put an FPDU end exactly
	// 64 KiB past the start of a 64 KiB tagged message; the sizes chosen now
	// put none there.
	ends := func(fpdu, msg int) map[int]bool {
		cfg := defaultConfig()
		cfg.maxFPDU = fpdu
		ulpdu := mulpduFor(nil, &cfg, false, false)
		payload := ulpdu - 14 // a tagged DDP header
		got := map[int]bool{}
		off := 0
		for msg > 0 {
			n := min(payload, msg)
			msg -= n
			off += 2 + 14 + n + (4-(2+14+n)%4)%4 + 4
			got[off] = true
		}
		return got
	}
	require.True(t, ends(32768, 65536)[65536], "the old size's second FPDU ends at 64 KiB")
	require.False(t, ends(fpduForMSS(32768), 65536)[65536])
}
