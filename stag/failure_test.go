package stag

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFailure_String(t *testing.T) {
	seen := map[string]bool{}
	for f := OK; f < numFailures; f++ {
		s := f.String()
		require.NotEmpty(t, s)
		require.False(t, seen[s], "duplicate name %q", s)
		seen[s] = true
	}
	require.Equal(t, "Failure(200)", Failure(200).String())
	require.Equal(t, "tagged offset wrap", TOWrap.Error())
	require.Equal(t, "tagged offset wrap", fmt.Sprint(TOWrap))

	var err error = PDMismatch
	var f Failure
	require.True(t, errors.As(err, &f))
	require.Equal(t, PDMismatch, f)
}

// The code points are those of the IANA RDDP registry (RFC 6580): RDMAP
// Remote Protection 0/1/x, RDMAP Remote Operation 0/2/0x09, DDP Tagged
// Buffer 1/1/x. Access rights has no DDP code; siw sends Invalid STag.
func TestFailure_Codes_IANA_RDDP(t *testing.T) {
	type codes struct {
		rdmap, ddp uint16
		hasDDP     bool
	}
	want := map[Failure]codes{
		InvalidSTag:        {0x0100, 0x1100, true},
		Invalidated:        {0x0100, 0x1100, true},
		BaseBounds:         {0x0101, 0x1101, true},
		AccessRights:       {0x0102, 0x1100, true},
		PDMismatch:         {0x0103, 0x1102, true},
		TOWrap:             {0x0104, 0x1103, true},
		CannotInvalidatePD: {0x0109, 0, false},
		CannotInvalidate:   {0x0209, 0, false},
	}
	require.Len(t, want, int(numFailures)-1, "every failure kind has an expectation")
	for f, w := range want {
		rc, ok := f.RDMAPCode()
		require.True(t, ok, "%v", f)
		require.Equal(t, w.rdmap, rc, "%v RDMAP", f)
		dc, ok := f.DDPTaggedCode()
		require.Equal(t, w.hasDDP, ok, "%v DDP defined", f)
		require.Equal(t, w.ddp, dc, "%v DDP", f)
		if ok {
			require.Equal(t, uint16(0x1100), dc&0xff00, "%v: DDP layer 1, tagged etype 1", f)
		}
	}
	for _, f := range []Failure{OK, numFailures, 0xff} {
		_, ok := f.RDMAPCode()
		require.False(t, ok, "%v", f)
		_, ok = f.DDPTaggedCode()
		require.False(t, ok, "%v", f)
	}
}
