package conn

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// transmitters counts the goroutines running engine.transmitter.
func transmitters() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "conn.(*engine).transmitter(")
}

// An idle connected queue pair parks no goroutine for its transmit side:
// the transmitter runs while there is work and ends after it, and the next
// work that needs one starts another.
func TestTransmitter_RunsOnlyWhileThereIsWork(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	ce, se := client.qp.tx.Load(), server.qp.tx.Load()
	require.NotNil(t, ce)
	require.NotNil(t, se)
	idle := func() bool { return !ce.txRunning.Load() && !se.txRunning.Load() && transmitters() == 0 }
	require.Eventually(t, idle, 10*time.Second, time.Millisecond, "connected and idle, a transmitter still runs")

	// A Write larger than the socket takes at once leaves the rest to a
	// transmitter goroutine, which writes it all and ends.
	const n = 8 << 20
	src := client.register(t, n, 0)
	copy(src.Bytes(), pattern(n, 3))
	dst := server.register(t, n, LocalWrite|RemoteWrite)
	before := ce.txStarts.Load()
	for round := 0; round < 2; round++ {
		require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, SGL: []SGE{src.SGE(0, n)}, Remote: dst.Remote(0), Flags: Signaled}))
		client.waitOK(t, WCRDMAWrite)
		// A Write's completion says it was sent; its placement follows.
		require.Eventually(t, func() bool { return bytes.Equal(src.Bytes(), dst.Bytes()) }, 10*time.Second, time.Millisecond)
		require.Eventually(t, idle, 10*time.Second, time.Millisecond, "round %d: the transmitter did not end after its work", round)
		clear(dst.Bytes())
	}
	require.GreaterOrEqual(t, ce.txStarts.Load()-before, int64(2), "each round's Write needed a transmitter goroutine")
}

// A Send posted while a long Write is still being segmented may find the
// transmit token free (between two of the Write's batches); the post then
// lets the Write finish before its own message starts. Posting started the
// next message whatever was current, once, which tangled both messages'
// segments and stopped the stream (TestOps_EndToEnd's 16 MiB case).
func TestPostSend_InlineWaitsForTheSegmentedMessage(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	const n = 3*maxBatchBytes + 1 // more than one batch: mid-message between batches
	src := client.register(t, n, 0)
	dst := server.register(t, n, LocalWrite|RemoteWrite)
	note := server.register(t, 8, LocalWrite)
	for round := 0; round < 4; round++ {
		data := pattern(n, byte(round))
		copy(src.Bytes(), data)
		require.NoError(t, server.qp.PostRecv(RecvWR{ID: uint64(round), SGL: []SGE{note.SGE(0, 8)}}))
		require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, n)}, Remote: dst.Remote(0)}))
		require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSend, Flags: Signaled, SGL: []SGE{src.SGE(0, 8)}}))
		require.Equal(t, uint32(n), client.waitOK(t, WCRDMAWrite).ByteLen)
		require.Equal(t, uint32(8), client.waitOK(t, WCSend).ByteLen)
		wc := server.waitOK(t, WCRecv)
		require.Equal(t, uint64(round), wc.ID)
		require.True(t, bytes.Equal(data, dst.Bytes()), "round %d: the Write's bytes", round)
		require.Equal(t, data[:8], note.Bytes())
	}
}
