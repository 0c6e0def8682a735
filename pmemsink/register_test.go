//go:build linux || darwin || freebsd

package pmemsink

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/stretchr/testify/require"
)

// The registrations of one protection domain share a tracker per sink,
// and an RDMA Read on any of them persists what the connection placed in
// every sink: read-after-write covers everything the connection wrote.
func TestRegister_ReadCoversEverySinkOfTheConnection(t *testing.T) {
	page := pageSize()
	ga, gb := &gateShadow{}, &gateShadow{}
	a := gatedSink(t, ga, 8)
	b := gatedSink(t, gb, 8)
	pd := conn.NewPD()
	ra, err := a.Register(pd, 2*page, 2*page, conn.RemoteWrite|conn.RemoteRead)
	require.NoError(t, err)
	ra2, err := a.Register(pd, 0, page, conn.RemoteWrite|conn.RemoteRead)
	require.NoError(t, err)
	rb, err := b.Register(pd, 0, 0, conn.RemoteWrite|conn.RemoteRead)
	require.NoError(t, err)
	require.Same(t, ra.gt, ra2.gt, "one tracker per sink and protection domain")
	require.Equal(t, Range{Off: 2 * page, Len: 2 * page}, ra.Window())

	ra.Placed(nil, 10, 5)        // sink a, byte 2*page+10
	rb.Placed(nil, int(page), 1) // sink b, page 1
	require.False(t, ra.g.clean())
	ra2.ReadRequested(nil, 0, 8, conn.ReadRelease{})
	ra.g.drain()
	require.Equal(t, []Range{{2 * page, page}}, ga.persists(), "the window's offset is the sink's")
	require.Equal(t, []Range{{page, page}}, gb.persists())
	require.True(t, ra.g.clean())
	ra2.ReadRequested(nil, 0, 8, conn.ReadRelease{})
	require.Len(t, ga.persists(), 1, "a clean connection's Read persists nothing")

	// A Flush Request persists only its own sink's ranges in its range.
	ra.Placed(nil, 0, 1)
	rb.Placed(nil, 0, 1)
	ra.FlushRequested(nil, 0, 1, true, conn.FlushRelease{})
	ra.g.drain()
	require.Len(t, ga.persists(), 2)
	require.Len(t, gb.persists(), 1, "sink b's range waits for its own flush")

	require.NoError(t, ra.Close())
	require.NoError(t, ra2.Close())
	require.NoError(t, rb.Close(), "the last one detaches b's tracker, persisting what is dirty")
	require.Len(t, gb.persists(), 2)
	require.NoError(t, rb.Close(), "twice is fine")
	groups.mu.Lock()
	defer groups.mu.Unlock()
	require.NotContains(t, groups.m, pd, "the group ended with its last registration")
}

// Register refuses windows outside the sink and an empty one.
func TestRegister_Window(t *testing.T) {
	s := openT(t, tpath(memDir(t), "f"), 1<<16)
	pd := conn.NewPD()
	_, err := s.Register(pd, 1<<16, 0, conn.RemoteRead)
	require.Error(t, err)
	_, err = s.Register(pd, 100, 1<<16, conn.RemoteRead)
	require.ErrorIs(t, err, ErrRange)
	r, err := s.Register(pd, 100, 0, conn.RemoteRead)
	require.NoError(t, err)
	require.Equal(t, 1<<16-100, r.MR().Len())
	require.NoError(t, r.Close())
	groups.mu.Lock()
	defer groups.mu.Unlock()
	require.NotContains(t, groups.m, pd)
}
