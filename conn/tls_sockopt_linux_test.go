package conn

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// Socket options reach the TCP connection beneath TLS: on both ends of a
// WithTLS pair, and under a *tls.Conn the application hands to Client.
func TestOptions_TCPBeneathTLS(t *testing.T) {
	checkLeaks(t)
	ca := tlstest.NewCA(t, "test CA")
	opts := []Option{WithTCPUserTimeout(1500 * time.Millisecond), WithTCPKeepAlive(7 * time.Second)}
	client, server := tlsPair(t, ca, pairConfig{clientOpts: opts, serverOpts: opts})
	for _, ep := range []*endpoint{client, server} {
		c := ep.qp.eng.c
		require.NotNil(t, tlsOf(c))
		require.Equal(t, 1500, sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT))
		require.Equal(t, 7, sockopt(t, c, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithTLS(ca.Server(t, "server", nil)))
	require.NoError(t, err)
	defer ln.Close()
	srv := newEndpoint(t, QPCaps{})
	errc := make(chan error, 1)
	go func() { errc <- ln.Accept(ctx, srv.qp) }()
	raw, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	ccfg := ca.Client(t, "")
	ccfg.ServerName, ccfg.NextProtos = "localhost", []string{"iwarp"}
	ep := newEndpoint(t, QPCaps{})
	require.NoError(t, ep.qp.Client(ctx, tls.Client(raw, ccfg), WithTCPUserTimeout(2500*time.Millisecond)))
	require.NoError(t, <-errc)
	_, ok := ep.qp.TLSState()
	require.True(t, ok, "an adopted *tls.Conn shows its state")
	require.Equal(t, 2500, sockopt(t, ep.qp.eng.c, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT))
	ep.qp.Close()
	srv.qp.Close()
}
