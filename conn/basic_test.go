package conn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSendRecv_Loopback(t *testing.T) {
	checkLeaks(t)
	var rmr *MR
	client, server := connectPair(t, pairConfig{beforeAccept: func(s *endpoint) {
		rmr = s.register(t, 4096, LocalWrite)
		require.NoError(t, s.qp.PostRecv(RecvWR{ID: 7, SGL: []SGE{rmr.SGE(0, 4096)}}))
	}})
	smr := client.register(t, 100, 0)
	copy(smr.Bytes(), pattern(100, 1))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 9, Op: OpSend, Flags: Signaled, SGL: []SGE{smr.SGE(0, 100)}}))
	wc := client.waitOK(t, WCSend)
	require.Equal(t, uint64(9), wc.ID)
	wc = server.waitOK(t, WCRecv)
	require.Equal(t, uint64(7), wc.ID)
	require.Equal(t, uint32(100), wc.ByteLen)
	require.Equal(t, pattern(100, 1), rmr.Bytes()[:100])
}

func TestWriteRead_Loopback(t *testing.T) {
	checkLeaks(t)
	var note *MR
	client, server := connectPair(t, pairConfig{beforeAccept: func(s *endpoint) {
		note = s.register(t, 16, LocalWrite)
		require.NoError(t, s.qp.PostRecv(RecvWR{ID: 1, SGL: []SGE{note.SGE(0, 16)}}))
	}})
	target := server.register(t, 1<<20, LocalWrite|RemoteWrite|RemoteRead)
	src := client.register(t, 1<<20, 0)
	copy(src.Bytes(), pattern(1<<20, 3))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 1<<20)}, Remote: target.Remote(0)}))
	client.waitOK(t, WCRDMAWrite)
	sink := client.register(t, 1<<20, LocalWrite)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 1<<20)}, Remote: target.Remote(0)}))
	wc := client.waitOK(t, WCRDMARead)
	require.Equal(t, uint32(1<<20), wc.ByteLen)
	require.Equal(t, src.Bytes(), sink.Bytes())
	// Bytes a peer wrote are visible to the target's program after a later
	// message from that peer has completed there.
	require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpSend}))
	server.waitOK(t, WCRecv)
	require.Equal(t, src.Bytes(), target.Bytes())
}
