//go:build linux || darwin || freebsd

package pmemsink

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// A sink served inside TLS, with mutual authentication: Dial takes
// conn.WithTLS through WithConnOptions, and a durable write works as over
// bare TCP; an initiator without TLS is refused with ErrTLSRequired.
func TestTLS_DurableWriteInsideTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "sink CA")
	path := tpath(diskDir(t), "sink")
	s := openT(t, path, 1<<20, WithMode(ModeMsync))
	x := serve(t, s, ServerConfig{}, conn.WithTLS(ca.Server(t, "sink", ca)))

	in := dialT(t, x.addr(), WithConnOptions(conn.WithTLS(ca.Client(t, "writer"))))
	data := []byte("durable inside TLS")
	res, err := in.WriteFlush(tctx(t), 4096, data, RequirePersistent())
	require.NoError(t, err)
	require.Equal(t, Persistent, res.Guarantee)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, data, b[4096:4096+len(data)])

	_, err = Dial(tctx(t), "tcp", x.addr())
	require.ErrorIs(t, err, conn.ErrTLSRequired)
}
