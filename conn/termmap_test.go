package conn

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// The region-check failures of each use map to the conditions of
// docs/rfc-notes/terminate.md: RDMA Write sinks to DDP Tagged Buffer codes
// (RFC 5041 §7.1; a region without remote write "allows" no Placement:
// Invalid STag, since RFC 5040 Figure 10 rules out Remote Protection codes
// for a Write), Read Request sources to RDMAP Remote Protection codes with
// the Read Request header attached (RFC 5040 §7.2).
func TestFailureConditions_RFC5040_RFC5041(t *testing.T) {
	lookupFailures := []stag.Failure{stag.InvalidSTag, stag.Invalidated, stag.PDMismatch, stag.AccessRights, stag.BaseBounds, stag.TOWrap}
	wantWrite := map[stag.Failure]termcode.Code{
		stag.InvalidSTag:  termcode.DDPTaggedInvalidSTag,
		stag.Invalidated:  termcode.DDPTaggedInvalidSTag,
		stag.PDMismatch:   termcode.DDPTaggedSTagNotAssociated,
		stag.AccessRights: termcode.DDPTaggedInvalidSTag,
		stag.BaseBounds:   termcode.DDPTaggedBaseBounds,
		stag.TOWrap:       termcode.DDPTaggedTOWrap,
	}
	wantRead := map[stag.Failure]termcode.Code{
		stag.InvalidSTag:  termcode.RDMAPInvalidSTag,
		stag.Invalidated:  termcode.RDMAPInvalidSTag,
		stag.PDMismatch:   termcode.RDMAPSTagNotAssociated,
		stag.AccessRights: termcode.RDMAPAccessRights,
		stag.BaseBounds:   termcode.RDMAPBaseBounds,
		stag.TOWrap:       termcode.RDMAPTOWrap,
	}
	for _, f := range lookupFailures {
		require.Equal(t, wantWrite[f], conditionFor(useWriteSink, f).Code(), "write %v", f)
		_, _, r := conditionFor(useWriteSink, f).Flags()
		require.False(t, r, "no Read Request header for a Write (%v)", f)

		src := conditionFor(useReadSource, f)
		require.Equal(t, wantRead[f], src.Code(), "read source %v", f)
		require.Equal(t, termcode.RDMAP, src.Code().Layer())
		require.Equal(t, uint8(1), src.Code().EType(), "Remote Protection for %v", f)
		_, _, r = src.Flags()
		require.True(t, r, "Read Request header attached for %v", f)
	}
	require.Equal(t, rdmap.SendInvProtection, conditionFor(useInvalidate, stag.CannotInvalidatePD))
	require.Equal(t, termcode.RDMAPProtCannotInvalidate, conditionFor(useInvalidate, stag.CannotInvalidatePD).Code())
	require.Equal(t, rdmap.SendInvCannotInvalidate, conditionFor(useInvalidate, stag.CannotInvalidate))
	require.Equal(t, termcode.RDMAPOpCannotInvalidate, conditionFor(useInvalidate, stag.CannotInvalidate).Code())
	// A failure a check cannot produce is not guessed into a code.
	require.Equal(t, rdmap.RDMAPLocalCatastrophic, conditionFor(useInvalidate, stag.BaseBounds))
	require.Equal(t, rdmap.RDMAPLocalCatastrophic, conditionFor(useWriteSink, stag.OK))
	require.Equal(t, rdmap.RDMAPLocalCatastrophic, conditionFor(numRemoteUses, stag.InvalidSTag))
	require.Equal(t, rdmap.RDMAPLocalCatastrophic, conditionFor(useWriteSink, stag.Failure(200)))
}
