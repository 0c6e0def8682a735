package connflags

import (
	"crypto/tls"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

func parseTLS(t *testing.T, args ...string) *TLS {
	t.Helper()
	var tf TLS
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	tf.Register(fs)
	require.NoError(t, fs.Parse(args))
	return &tf
}

func TestTLS_Flags(t *testing.T) {
	ca := tlstest.NewCA(t, "flags CA")
	caFile, cert, key := ca.Files(t, t.TempDir(), "peer")

	opts, err := parseTLS(t).Options(true)
	require.NoError(t, err)
	require.Empty(t, opts, "no flag, no TLS")

	// A client with the CA alone trusts it and has no certificate.
	cfg, err := parseTLS(t, "--tls-ca", caFile).Config(false)
	require.NoError(t, err)
	require.NotNil(t, cfg.RootCAs)
	require.Empty(t, cfg.Certificates)

	// A server with all three requires client certificates from the CA.
	cfg, err = parseTLS(t, "--tls-cert", cert, "--tls-key", key, "--tls-ca", caFile).Config(true)
	require.NoError(t, err)
	require.Len(t, cfg.Certificates, 1)
	require.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
	require.NotNil(t, cfg.ClientCAs)

	// A server with a certificate and no CA asks for none.
	cfg, err = parseTLS(t, "--tls-cert", cert, "--tls-key", key).Config(true)
	require.NoError(t, err)
	require.Equal(t, tls.NoClientCert, cfg.ClientAuth)

	for _, tc := range []struct {
		args   []string
		server bool
		msg    string
	}{
		{[]string{"--tls-cert", cert}, false, "go together"},
		{[]string{"--tls-key", key}, true, "go together"},
		{[]string{"--tls-ca", caFile}, true, "needs --tls-cert"},
		{[]string{"--tls-ca", cert + ".missing"}, false, "--tls-ca"},
		{[]string{"--tls-ca", key}, false, "no PEM certificate"},
		{[]string{"--tls-cert", key, "--tls-key", key}, false, "--tls-cert/--tls-key"},
	} {
		_, err := parseTLS(t, tc.args...).Options(tc.server)
		require.ErrorContains(t, err, tc.msg, "%v", tc.args)
	}
}
