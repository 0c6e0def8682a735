package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReport_RoundTripAndBounds(t *testing.T) {
	for _, r := range []Report{
		{},
		{CRC: true, FPDUs: 1 << 40, CRCErrors: 3, CPU: 1500 * time.Millisecond, CPUKnown: true, RoundTrips: 20000},
		{FPDUs: 7, RoundTrips: 1},
	} {
		b := AppendReport(nil, r)
		require.Len(t, b, reportLen)
		got, err := ParseReport(b)
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	good := AppendReport(nil, Report{CRC: true, CPUKnown: true, CPU: time.Second})
	bad := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for name, b := range map[string][]byte{
		"short":         good[:reportLen-1],
		"long":          append(append([]byte(nil), good...), 0),
		"magic":         bad(func(b []byte) { b[0] = 'x' }),
		"flags":         bad(func(b []byte) { b[4] |= 0x80 }),
		"reserved":      bad(func(b []byte) { b[6] = 1 }),
		"cpu-negative":  bad(func(b []byte) { b[24] = 0x80 }),
		"cpu-not-known": bad(func(b []byte) { b[4] &^= reportCPU }),
		"session":       AppendSession(nil, Session{Phase: PhaseBandwidth, Op: 'w', Size: 1, Window: 1}),
	} {
		_, err := ParseReport(b)
		require.Error(t, err, name)
	}
}

func TestCRCCount_Describe(t *testing.T) {
	var c crcCount
	require.Equal(t, "no FPDUs counted", c.describe())
	c.add(received{crc: true, fpdus: 100})
	c.addReport(Report{CRC: true, FPDUs: 5})
	require.Equal(t, crcCount{fpdus: 105, checked: 105}, c)
	require.Equal(t, "CRC checked on every FPDU received (105, both ends), 0 CRC errors", c.describe())
	c.add(received{fpdus: 10})
	require.Equal(t, "CRC checked on 105 of 115 FPDUs received (both ends), 0 CRC errors", c.describe())
	off := crcCount{}
	off.add(received{fpdus: 9})
	require.Equal(t, "CRC not checked (9 FPDUs received, both ends)", off.describe())
}
