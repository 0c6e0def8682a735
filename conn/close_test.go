package conn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClose_DrainedWhenWorkCompletes: a graceful Close waits for posted
// work, and is told when the last work request completes wherever that
// happens (a Read completes in the receiver, a Send after a flush) — it must
// never fall back to its timeout when the queue drained.
func TestClose_DrainedWhenWorkCompletes(t *testing.T) {
	checkLeaks(t)
	for i := 0; i < 30; i++ {
		client, server := connectPair(t, pairConfig{beforeAccept: func(s *endpoint) {
			require.NoError(t, s.qp.PostRecv(RecvWR{}))
		}})
		src := server.register(t, 64, RemoteRead)
		sink := client.register(t, 64, LocalWrite)
		_, err := client.qp.PostSendBatch([]SendWR{
			{ID: 1, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 64)}, Remote: src.Remote(0)},
			{ID: 2, Op: OpSend, Flags: Signaled},
		})
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, client.qp.Close())
		require.Less(t, time.Since(start), DefaultCloseTimeout/2, "Close fell back to its timeout")
		// Both work requests completed before the connection closed.
		require.Equal(t, uint64(1), client.waitOK(t, WCRDMARead).ID)
		require.Equal(t, uint64(2), client.waitOK(t, WCSend).ID)
		server.qp.Close()
	}
}
