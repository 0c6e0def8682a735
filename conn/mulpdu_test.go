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
