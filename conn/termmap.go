package conn

import (
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// remoteUse is what a peer's message asks of a region it names by STag.
type remoteUse uint8

const (
	useWriteSink    remoteUse = iota // RDMA Write: place into the region
	useReadSource                    // RDMA Read Request: read the region
	useInvalidate                    // Send with Invalidate: invalidate it
	useAtomicTarget                  // RFC 7306 Atomic Request: change a word of it
	numRemoteUses
)

// failureConditions is the one mapping from a failed region check to the
// Terminate condition it ends the stream with; the condition gives the
// code and attachments (rdmap, docs/rfc-notes/terminate.md). The hostile
// suite sends every row and checks the Terminate's bytes.
var failureConditions = [numRemoteUses][stag.SharedStreams + 1]rdmap.Condition{
	useWriteSink: {
		stag.InvalidSTag:  rdmap.WriteInvalidSTag,
		stag.Invalidated:  rdmap.WriteInvalidSTag,
		stag.PDMismatch:   rdmap.WriteSTagNotAssociated,
		stag.QPMismatch:   rdmap.WriteSTagNotAssociated,
		stag.AccessRights: rdmap.WriteAccessRights,
		stag.BaseBounds:   rdmap.WriteBaseBounds,
		stag.TOWrap:       rdmap.WriteTOWrap,
	},
	useReadSource: {
		stag.InvalidSTag:  rdmap.ReadReqSourceInvalidSTag,
		stag.Invalidated:  rdmap.ReadReqSourceInvalidSTag,
		stag.PDMismatch:   rdmap.ReadReqSourceNotAssociated,
		stag.QPMismatch:   rdmap.ReadReqSourceNotAssociated,
		stag.AccessRights: rdmap.ReadReqSourceAccessRights,
		stag.BaseBounds:   rdmap.ReadReqSourceBaseBounds,
		stag.TOWrap:       rdmap.ReadReqSourceTOWrap,
	},
	useInvalidate: {
		stag.CannotInvalidatePD: rdmap.SendInvProtection,
		stag.CannotInvalidate:   rdmap.SendInvCannotInvalidate,
		stag.QPMismatch:         rdmap.SendInvProtection,
		stag.SharedStreams:      rdmap.SendInvProtection,
	},
	useAtomicTarget: {
		stag.InvalidSTag:  rdmap.AtomicTargetInvalidSTag,
		stag.Invalidated:  rdmap.AtomicTargetInvalidSTag,
		stag.PDMismatch:   rdmap.AtomicTargetNotAssociated,
		stag.QPMismatch:   rdmap.AtomicTargetNotAssociated,
		stag.AccessRights: rdmap.AtomicTargetAccessRights,
		stag.BaseBounds:   rdmap.AtomicTargetBaseBounds,
		stag.TOWrap:       rdmap.AtomicTargetTOWrap,
	},
}

// conditionFor returns the condition for failure f of use u. A failure
// the table does not list for u cannot come from that check; it is
// reported as a local catastrophic error rather than guessed.
func conditionFor(u remoteUse, f stag.Failure) rdmap.Condition {
	if u < numRemoteUses && int(f) < len(failureConditions[u]) {
		if c := failureConditions[u][f]; c != 0 {
			return c
		}
	}
	return rdmap.RDMAPLocalCatastrophic
}
