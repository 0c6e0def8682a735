package termcode

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// registered lists every triple of the IANA RDDP registry (RFC 6580;
// registries rdmap-errors, ddp-errors, mpa-errors) with a name fragment;
// "ALL" types are probed with two codes.
var registered = []struct {
	code Code
	name string
}{
	{0x0000, "Local Catastrophic Error"},
	{0x00ff, "Local Catastrophic Error"},
	{0x0100, "Invalid Steering Tag"},
	{0x0101, "Base or bounds violation"},
	{0x0102, "Access rights violation"},
	{0x0103, "not associated with RDMAP Stream"},
	{0x0104, "Tagged Offset wrap"},
	{0x0109, "STag cannot be invalidated"},
	{0x01ff, "Unspecified Error"},
	{0x0205, "Invalid RDMAP version"},
	{0x0206, "Unexpected OpCode"},
	{0x0207, "localized to RDMAP Stream"},
	{0x0208, "global"},
	{0x0209, "STag cannot be Invalidated"},
	{0x02ff, "Unspecified Error"},
	{0x1000, "Local Catastrophic"},
	{0x1100, "Invalid Steering Tag"},
	{0x1101, "Base or bounds violation"},
	{0x1102, "not associated with DDP Stream"},
	{0x1103, "Tagged Offset wrap"},
	{0x1104, "Invalid DDP version"},
	{0x1201, "Invalid Queue Number"},
	{0x1202, "no buffer available"},
	{0x1203, "MSN range is not valid"},
	{0x1204, "Invalid Message Offset"},
	{0x1205, "too long for available buffer"},
	{0x1206, "Invalid DDP version"},
	{0x1300, "Reserved for use by Lower Layer Protocol"},
	{0x13aa, "Reserved for use by Lower Layer Protocol"},
	{0x2001, "TCP connection closed"},
	{0x2002, "MPA CRC Error"},
	{0x2003, "Marker and ULPDU Length"},
	{0x2004, "Invalid MPA Request Frame"},
	{0x2005, "Local catastrophic error"},
	{0x2006, "Insufficient IRD"},
	{0x2007, "No matching RTR"},
}

func TestCode_IANARegistry(t *testing.T) {
	for _, r := range registered {
		require.True(t, r.code.Defined(), "%#04x", uint16(r.code))
		require.True(t, r.code.Known())
		require.Contains(t, r.code.String(), r.name)
		require.Contains(t, r.code.String(), fmt.Sprintf("(%d/%d/0x%02x)", r.code.Layer(), r.code.EType(), r.code.ECode()))
	}
	n := 0
	for c := 0; c <= 0xffff; c++ {
		if Code(c).Defined() {
			n++
		}
	}
	// 256 (0/0/ALL) + 7 + 6 + 1 + 5 + 6 + 256 (1/3/ALL) + 7
	require.Equal(t, 256+7+6+1+5+6+256+7, n, "no code is defined that the registry lacks")
}

func TestCode_Constants(t *testing.T) {
	for _, c := range []Code{
		RDMAPLocalCatastrophic, RDMAPInvalidSTag, RDMAPBaseBounds, RDMAPAccessRights,
		RDMAPSTagNotAssociated, RDMAPTOWrap, RDMAPProtCannotInvalidate, RDMAPProtUnspecified,
		RDMAPInvalidVersion, RDMAPUnexpectedOpcode, RDMAPStreamCatastrophic,
		RDMAPGlobalCatastrophic, RDMAPOpCannotInvalidate, RDMAPOpUnspecified,
		DDPLocalCatastrophic, DDPTaggedInvalidSTag, DDPTaggedBaseBounds,
		DDPTaggedSTagNotAssociated, DDPTaggedTOWrap, DDPTaggedVersion, DDPUntaggedInvalidQN,
		DDPUntaggedNoBuffer, DDPUntaggedMSNRange, DDPUntaggedInvalidMO, DDPUntaggedTooLong,
		DDPUntaggedVersion, MPAConnectionLost, MPACRC, MPAMarker, MPAInvalidFrame,
		MPALocalCatastrophic, MPAInsufficientIRD, MPANoMatchingRTR,
	} {
		require.True(t, c.Defined(), "%#04x", uint16(c))
	}
	require.Equal(t, LLP, MPACRC.Layer())
	require.Equal(t, "LLP MPA Error: MPA CRC Error (2/0/0x02)", MPACRC.String())
	require.Equal(t, MPACRC.String(), MPACRC.Error())
}

func TestCode_Unregistered(t *testing.T) {
	for _, c := range []Code{0x0105, 0x0202, 0x0200, 0x0300, 0x1001, 0x1105, 0x1200, 0x1207, 0x1400, 0x2000, 0x2008, 0x2102, 0x3000, 0xf102} {
		require.False(t, c.Defined(), "%#04x", uint16(c))
		require.NotPanics(t, func() { _ = c.String() })
	}
	require.Contains(t, Code(0x0202).String(), "unknown code")
	require.Contains(t, Code(0x3102).String(), "layer 3")
	require.Contains(t, Code(0x0402).String(), "unknown")
}

func TestCode_HardwareMPAType3(t *testing.T) {
	for code := uint8(1); code <= 7; code++ {
		c := Make(LLP, 3, code)
		require.False(t, c.Defined())
		require.True(t, c.Known())
		require.Contains(t, c.String(), "error type 3")
	}
	require.False(t, Make(LLP, 3, 8).Known())
	require.False(t, Make(LLP, 1, 2).Known())
}

func TestCode_Parts(t *testing.T) {
	c := Make(DDP, 2, 0x05)
	require.Equal(t, DDPUntaggedTooLong, c)
	require.Equal(t, DDP, c.Layer())
	require.Equal(t, uint8(2), c.EType())
	require.Equal(t, uint8(5), c.ECode())
	require.Equal(t, "1/2/0x05", c.Triple())
	require.Equal(t, Code(0xf3ab), Make(0x1f, 0x13, 0xab), "nibbles are masked")
}

func TestOf(t *testing.T) {
	c, ok := Of(fmt.Errorf("reading: %w", MPACRC))
	require.True(t, ok)
	require.Equal(t, MPACRC, c)
	_, ok = Of(fmt.Errorf("plain"))
	require.False(t, ok)
	_, ok = Of(nil)
	require.False(t, ok)
}
