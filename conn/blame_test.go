package conn

import (
	"errors"
	"testing"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// A work request the peer answers with a Terminate completes with the
// status libibverbs and siw give it, its error wrapping the Terminate;
// requests that completed before stay successful, later ones flush.
func TestCompletion_StatusOfTheWorkRequestAPeerTerminated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote func(mr *MR) RemoteAddr
		length int
		rights Access
		status WCStatus
		code   termcode.Code
	}{
		{"Read past the end", func(mr *MR) RemoteAddr { return mr.Remote(mr.Len() - 8) }, 64, RemoteRead, WCRemAccessErr, termcode.RDMAPBaseBounds},
		{"Read without remote read", func(mr *MR) RemoteAddr { return mr.Remote(0) }, 64, RemoteWrite | LocalWrite, WCRemAccessErr, termcode.RDMAPAccessRights},
		{"Read of an unknown STag", func(*MR) RemoteAddr { return RemoteAddr{STag: 0x7fff0011} }, 64, RemoteRead, WCRemAccessErr, termcode.RDMAPInvalidSTag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			client, server := connectPair(t, pairConfig{})
			local := client.register(t, 4096, LocalWrite)
			remote := server.register(t, 256, tc.rights)
			wrs := []SendWR{
				{ID: 1, Op: OpSend, Flags: Signaled, SGL: []SGE{local.SGE(0, 0)}},
				{ID: 2, Op: OpRead, Flags: Signaled | Fence, SGL: []SGE{local.SGE(0, tc.length)}, Remote: tc.remote(remote)},
				{ID: 3, Op: OpSend, Flags: Signaled | Fence, SGL: []SGE{local.SGE(0, 8)}},
			}
			require.NoError(t, server.qp.PostRecv(RecvWR{ID: 9}))
			_, err := client.qp.PostSendBatch(wrs)
			require.NoError(t, err)
			first := client.wait(t)
			require.Equal(t, uint64(1), first.ID)
			require.NoError(t, first.Err(), "completed before the Terminate: stays successful")
			read := client.wait(t)
			require.Equal(t, uint64(2), read.ID)
			require.Equal(t, tc.status, read.Status)
			var te *rdmap.TerminateError
			require.True(t, errors.As(read.Err(), &te), "%v", read.Err())
			require.True(t, te.Remote)
			require.Equal(t, tc.code, te.Code)
			later := client.wait(t)
			require.Equal(t, uint64(3), later.ID)
			require.Equal(t, WCWRFlushErr, later.Status)
		})
	}
}

func TestWCStatusForTerminate(t *testing.T) {
	for c, want := range map[termcode.Code]WCStatus{
		termcode.RDMAPInvalidSTag:        WCRemAccessErr,
		termcode.RDMAPBaseBounds:         WCRemAccessErr,
		termcode.DDPTaggedInvalidSTag:    WCRemAccessErr,
		termcode.DDPTaggedBaseBounds:     WCRemAccessErr,
		termcode.DDPUntaggedNoBuffer:     WCRemInvReqErr,
		termcode.DDPUntaggedTooLong:      WCRemInvReqErr,
		termcode.RDMAPUnexpectedOpcode:   WCRemInvReqErr,
		termcode.RDMAPStreamCatastrophic: WCRemOpErr,
		termcode.RDMAPOpCannotInvalidate: WCRemOpErr,
		termcode.MPACRC:                  WCRemOpErr,
		termcode.RDMAPLocalCatastrophic:  WCRemOpErr,
	} {
		require.Equal(t, want, wcStatusForTerminate(c), c.String())
	}
}
