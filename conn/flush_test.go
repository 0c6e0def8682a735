package conn

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// recordingHooks records what the engine tells a region's owner, and holds
// Read and Flush responses until the test lets them go.
type recordingHooks struct {
	mu      sync.Mutex
	placed  [][2]int // off, n
	reads   []ReadRelease
	flushes []FlushRelease
	asked   chan struct{}
}

func newRecordingHooks() *recordingHooks { return &recordingHooks{asked: make(chan struct{}, 16)} }

func (h *recordingHooks) Placed(_ *QP, off, n int) {
	h.mu.Lock()
	h.placed = append(h.placed, [2]int{off, n})
	h.mu.Unlock()
}

func (h *recordingHooks) ReadRequested(_ *QP, off, n int, r ReadRelease) {
	h.mu.Lock()
	h.reads = append(h.reads, r)
	h.mu.Unlock()
	h.asked <- struct{}{}
}

func (h *recordingHooks) FlushRequested(_ *QP, off, n int, persist bool, r FlushRelease) {
	h.mu.Lock()
	h.flushes = append(h.flushes, r)
	h.mu.Unlock()
	h.asked <- struct{}{}
}

func (h *recordingHooks) placedCopy() [][2]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][2]int(nil), h.placed...)
}

// The Flush extension between two iwarp-go peers: the response comes only
// once the target's hooks released it, after they were told of every Write
// before the Flush; its completion says whether the bytes are persistent.
func TestFlush_ExtensionBetweenIwarpGoPeers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		persisted  bool
		err        error
		status     WCStatus
		persistent bool
	}{
		{"persisted", true, nil, WCSuccess, true},
		{"not durable", false, nil, WCSuccess, false},
		{"persist failed", false, errors.New("EIO"), WCRemOpErr, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			client, server := connectPair(t, pairConfig{})
			hooks := newRecordingHooks()
			target, err := server.pd.Register(make([]byte, 4096), LocalWrite|RemoteWrite, WithHooks(hooks))
			require.NoError(t, err)
			src := client.register(t, 4096, 0)
			_, err = client.qp.PostSendBatch([]SendWR{
				{ID: 1, Op: OpWrite, SGL: []SGE{src.SGE(0, 1000)}, Remote: target.Remote(100)},
				{ID: 2, Op: OpFlush, Flags: Signaled, Remote: target.Remote(100), FlushLength: 1000},
			})
			require.NoError(t, err)
			returnsWithin(t, hangLimit, "the flush reaching the hooks", func() { <-hooks.asked })
			require.Equal(t, [][2]int{{100, 1000}}, hooks.placedCopy(), "the Write was reported before the Flush")
			select {
			case <-time.After(50 * time.Millisecond):
			case <-client.cq.Ready():
				t.Fatal("the flush completed before the target released it")
			}
			hooks.mu.Lock()
			release := hooks.flushes[0]
			hooks.mu.Unlock()
			release.Release(tc.persisted, tc.err)
			release.Release(true, nil) // a second call changes nothing
			wc := client.wait(t)
			require.Equal(t, uint64(2), wc.ID)
			require.Equal(t, WCFlush, wc.Op)
			require.Equal(t, tc.status, wc.Status)
			require.Equal(t, tc.persistent, wc.Flags&WCFlushPersistent != 0)
			if tc.err != nil {
				var fe *FlushError
				require.ErrorAs(t, wc.Err(), &fe)
				require.Equal(t, rdmap.FlushPersistFailed, fe.Status)
			}
			// The stream goes on after any status.
			require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 8)}, Remote: target.Remote(0)}))
			client.waitOK(t, WCRDMAWrite)
		})
	}
}

// A region without FlushHooks answers visibility only.
func TestFlush_PlainMemoryIsNotDurable(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	target := server.register(t, 64, LocalWrite|RemoteWrite)
	require.True(t, client.qp.PeerFlushes())
	require.True(t, server.qp.PeerFlushes())
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpFlush, Flags: Signaled | FlushRegion, Remote: target.Remote(0)}))
	wc := client.waitOK(t, WCFlush)
	require.Zero(t, wc.Flags&WCFlushPersistent)
}

// A flush of memory the peer may not write ends the stream like a bad Read.
func TestFlush_RegionChecks(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	target := server.register(t, 64, RemoteRead)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpFlush, Flags: Signaled, Remote: target.Remote(0), FlushLength: 8}))
	wc := client.wait(t)
	require.Equal(t, WCRemAccessErr, wc.Status)
	<-server.qp.Done()
	var te *rdmap.TerminateError
	require.ErrorAs(t, server.qp.Err(), &te)
	require.Equal(t, rdmap.ReadReqSourceAccessRights.Code(), te.Code)
}

// Toward a peer without the extension an OpFlush fails locally and sends
// nothing.
func TestFlush_UnsupportedPeer(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{clientOpts: []Option{WithoutPeerTrailer()}})
	target := server.register(t, 64, LocalWrite|RemoteWrite)
	require.False(t, client.qp.PeerFlushes())
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpFlush, Flags: Signaled, Remote: target.Remote(0), FlushLength: 8}))
	wc := client.wait(t)
	require.Equal(t, WCLocQPOpErr, wc.Status)
	require.ErrorIs(t, wc.Err(), ErrFlushUnsupported)
	require.Zero(t, server.qp.Stats().FPDUsReceived[rdmap.OpExtension])
}

// RegionHooks.ReadRequested holds a Read Response back until released,
// after the Writes before the Read were reported (read-after-write).
func TestHooks_ReadHeldUntilReleased(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	hooks := newRecordingHooks()
	target, err := server.pd.Register(make([]byte, 4096), LocalWrite|RemoteWrite|RemoteRead, WithHooks(hooks))
	require.NoError(t, err)
	src := client.register(t, 64, LocalWrite)
	_, err = client.qp.PostSendBatch([]SendWR{
		{ID: 1, Op: OpWrite, SGL: []SGE{src.SGE(0, 8)}, Remote: target.Remote(512)},
		{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{src.SGE(8, 8)}, Remote: target.Remote(512)},
	})
	require.NoError(t, err)
	returnsWithin(t, hangLimit, "the Read reaching the hooks", func() { <-hooks.asked })
	require.Equal(t, [][2]int{{512, 8}}, hooks.placedCopy())
	select {
	case <-time.After(50 * time.Millisecond):
	case <-client.cq.Ready():
		t.Fatal("the Read completed before the target released it")
	}
	hooks.mu.Lock()
	release := hooks.reads[0]
	hooks.mu.Unlock()
	release.Release(nil)
	require.Equal(t, uint64(2), client.waitOK(t, WCRDMARead).ID)
	require.Equal(t, uint64(1), server.qp.Stats().ReadsHeld)
}
