package conn

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scribble keeps changing b until stop is closed, the way another
// connection's Writes or the application change a region peers read.
func scribble(b []byte, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		for j := i % 61; j < len(b); j += 4093 {
			b[j]++
		}
	}
}

// A Read Response's CRC covers exactly the bytes sent: a region written
// while peers read it gives them some version of its bytes, never a CRC
// error that ends the connection.
func TestReadResponse_SourceChangingDuringTheRead(t *testing.T) {
	checkLeaks(t)
	const size = 1 << 20
	client, server := connectPair(t, pairConfig{})
	require.True(t, client.qp.Negotiated().CRC)
	src := server.register(t, size, LocalWrite|RemoteRead)
	sink := client.register(t, size, LocalWrite)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go scribble(src.Bytes(), stop, &wg)
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 20; i++ {
		require.NoError(t, client.qp.PostSend(SendWR{ID: uint64(i), Op: OpRead, Flags: Signaled,
			SGL: []SGE{sink.SGE(0, size)}, Remote: src.Remote(0)}))
		wc := client.waitOK(t, WCRDMARead)
		require.Equal(t, uint64(i), wc.ID)
	}
	require.NoError(t, client.qp.Err())
	require.NoError(t, server.qp.Err())
}

// The same for a Write whose source is a region peers may write: another
// connection's Writes land in it while it is being sent.
func TestWrite_SourceWrittenByPeersMeanwhile(t *testing.T) {
	checkLeaks(t)
	const size = 256 << 10
	a, b := connectPair(t, pairConfig{}) // a writes to b from shared
	c, d := connectPair(t, pairConfig{}) // d keeps writing into shared
	shared, err := a.pd.Register(make([]byte, size), LocalWrite|RemoteWrite)
	require.NoError(t, err)
	target := b.register(t, size, LocalWrite|RemoteWrite)
	// d writes into the same memory through c, registered in c's domain.
	dshared, err := c.pd.Register(shared.Bytes(), LocalWrite|RemoteWrite)
	require.NoError(t, err)
	dsrc := d.register(t, size, 0)
	var writes atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			dsrc.Bytes()[i%size]++
			if err := d.qp.PostSend(SendWR{Op: OpWrite, Flags: Signaled, SGL: []SGE{dsrc.SGE(0, size)}, Remote: dshared.Remote(0)}); err != nil {
				done <- err
				return
			}
			var wc [1]WorkCompletion
			if _, err := d.cq.Wait(ctx, wc[:]); err != nil {
				done <- nil // the test ended
				return
			}
			if err := wc[0].Err(); err != nil {
				done <- err
				return
			}
			writes.Add(1)
		}
		done <- nil
	}()
	for i := 0; i < 40; i++ {
		require.NoError(t, a.qp.PostSend(SendWR{Op: OpWrite, Flags: Signaled, SGL: []SGE{shared.SGE(0, size)}, Remote: target.Remote(0)}))
		a.waitOK(t, WCRDMAWrite)
	}
	cancel()
	require.NoError(t, <-done)
	require.Positive(t, writes.Load(), "no Write landed in the source meanwhile")
	require.NoError(t, a.qp.Err())
	require.NoError(t, b.qp.Err())
}
