package conn

import (
	"context"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// TestSendWithInvalidate_SharedPD_RFC5040_8_1_1_Item7: "An RNIC MUST ensure
// that a Remote Peer is not able to invalidate an STag enabled for remote
// access, if the STag is shared on multiple streams." A region of a PD with
// two connected queue pairs is valid on both streams, so a Send with
// Invalidate naming it ends the sender's stream with 0/1/0x09 and leaves the
// region valid for the other peer; once only one queue pair is left, the
// same invalidation is carried out.
func TestSendWithInvalidate_SharedPD_RFC5040_8_1_1_Item7(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pd := NewPD()
	scq := NewCQ(64)
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	rbuf, err := pd.Register(make([]byte, 64), LocalWrite)
	require.NoError(t, err)
	var sqp [3]*QP
	var cli [3]*endpoint
	connect := func(i int) {
		sqp[i], cli[i] = connectOnPD(t, ctx, ln, pd, scq, func(qp *QP) {
			require.NoError(t, qp.PostRecv(RecvWR{ID: uint64(i), SGL: []SGE{rbuf.SGE(0, 64)}}))
		})
	}
	connect(0)
	connect(1)
	exposed, err := pd.Register(make([]byte, 64), LocalWrite|RemoteWrite)
	require.NoError(t, err)

	src := cli[0].register(t, 8, 0)
	require.NoError(t, cli[0].qp.PostSend(SendWR{Op: OpSendInv, InvSTag: exposed.STag(), SGL: []SGE{src.SGE(0, 8)}}))
	select {
	case <-sqp[0].Done():
	case <-ctx.Done():
		t.Fatal("the Send with Invalidate of a shared region did not end its stream")
	}
	var te *rdmap.TerminateError
	require.ErrorAs(t, sqp[0].Err(), &te)
	require.Equal(t, termcode.RDMAPProtCannotInvalidate, te.Code)
	<-sqp[0].finished

	// The other stream still writes into the region: it was not invalidated.
	other := cli[1].register(t, 8, 0)
	copy(other.Bytes(), "still ok")
	require.NoError(t, cli[1].qp.PostSend(SendWR{Op: OpWrite, Flags: Signaled, SGL: []SGE{other.SGE(0, 8)}, Remote: exposed.Remote(0)}))
	cli[1].waitOK(t, WCRDMAWrite)
	require.NoError(t, cli[1].qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{other.SGE(0, 8)}}))
	var wcs [4]WorkCompletion
	for {
		n, err := scq.Wait(ctx, wcs[:1])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		if wcs[0].ID == 1 {
			break
		}
		// the receive the terminated stream had posted, flushed in error
		require.Equal(t, uint64(0), wcs[0].ID)
	}
	require.NoError(t, wcs[0].Err())
	require.Equal(t, WCRecv, wcs[0].Op)
	require.Equal(t, "still ok", string(exposed.Bytes()[:8]))

	// With the second stream gone, the PD's region is no longer shared.
	cli[1].qp.Close()
	<-sqp[1].finished
	require.Eventually(t, func() bool { return pd.pd.Streams() == 0 }, 5*time.Second, time.Millisecond)
	connect(2)
	src2 := cli[2].register(t, 8, 0)
	require.NoError(t, cli[2].qp.PostSend(SendWR{Op: OpSendInv, InvSTag: exposed.STag(), SGL: []SGE{src2.SGE(0, 8)}}))
	n, err := scq.Wait(ctx, wcs[:1])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, wcs[0].Err())
	require.Equal(t, uint64(2), wcs[0].ID)
	require.Equal(t, WCWithInv, wcs[0].Flags&WCWithInv)
	require.Equal(t, uint32(exposed.STag()), wcs[0].InvSTag)
}
