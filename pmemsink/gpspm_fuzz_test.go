//go:build linux || darwin || freebsd

package pmemsink

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/rpma"
	"github.com/stretchr/testify/require"
)

// Whatever a peer sends as a GPSPM request, a window's registration either
// refuses it with an error and persists nothing, or persists inside the
// window and answers with the request's op_context.
func FuzzRegistrationGPSPM(f *testing.F) {
	f.Add(rpma.FlushRequest{Offset: 1, Length: 2, OpContext: 3}.Append(nil))
	f.Add(rpma.FlushRequest{Offset: 4096, Length: 0, OpContext: 3}.Append(nil))
	f.Add(rpma.FlushRequest{Offset: 4090, Length: 7}.Append(nil))
	f.Add(rpma.FlushRequest{Offset: 1 << 63, Length: 1 << 63}.Append(nil))
	f.Add([]byte{0x09, 1, 2})
	f.Add([]byte{})
	page := pageSize()
	g := &gateShadow{}
	s, err := Open(tpath(memDir(f), "fuzz"), int64(4*page), WithShadow(g, ModeMsync))
	require.NoError(f, err)
	f.Cleanup(func() { s.Close() })
	reg, err := s.Register(conn.NewPD(), page, 2*page, conn.RemoteWrite|conn.RemoteRead)
	require.NoError(f, err)
	f.Cleanup(func() { reg.Close() })
	f.Fuzz(func(t *testing.T, msg []byte) {
		before := len(g.persists())
		type outcome struct {
			resp rpma.FlushResponse
			err  error
		}
		done := make(chan outcome, 1)
		err := reg.GPSPM(msg, func(resp rpma.FlushResponse, err error) { done <- outcome{resp, err} })
		req, perr := rpma.ParseFlushRequest(msg)
		if err != nil {
			require.Len(t, g.persists(), before, "a refused request persists nothing")
			if perr == nil {
				require.False(t, req.Length <= 2*page && req.Offset <= 2*page-req.Length, "a request inside the window was refused: %v", err)
			}
			return
		}
		require.NoError(t, perr)
		o := <-done
		require.NoError(t, o.err)
		require.Equal(t, req.OpContext, o.resp.OpContext)
		for _, r := range g.persists()[before:] {
			require.True(t, r.Off >= page && r.End() <= 3*page, "persist %v outside the window", r)
		}
		if req.Length > 0 {
			require.Greater(t, len(g.persists()), before)
		}
	})
}
