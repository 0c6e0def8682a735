package metricshttp

import (
	"context"
	"flag"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/promtest"
)

func parseFlags(t *testing.T, args string) *Flags {
	t.Helper()
	var m Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	m.Register(fs)
	require.NoError(t, fs.Parse(strings.Fields(args)))
	return &m
}

func TestFlags_Check(t *testing.T) {
	require.NoError(t, parseFlags(t, "").Check())
	require.NoError(t, parseFlags(t, "--metrics 127.0.0.1:0 --metrics-qps").Check())
	require.EqualError(t, parseFlags(t, "--metrics-qps").Check(), "--metrics-qps needs --metrics ADDR")
}

// Without --metrics there is no endpoint, and the nil Server does
// nothing; with it, the endpoint serves the default device, per queue
// pair with --metrics-qps; an address that cannot be listened on is
// named as --metrics's.
func TestFlags_Open(t *testing.T) {
	srv, err := parseFlags(t, "").Open()
	require.NoError(t, err)
	require.Nil(t, srv)
	srv.Close()

	srv, err = parseFlags(t, "--metrics 127.0.0.1:0 --metrics-qps").Open()
	require.NoError(t, err)
	defer srv.Close()
	s, err := promtest.Scrape("http://" + srv.Addr().String() + "/metrics")
	require.NoError(t, err)
	require.Contains(t, s.Names(), "go_goroutines")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, err = Fetch(context.Background(), client, srv.Addr().String())
	require.NoError(t, err)

	_, err = parseFlags(t, "--metrics "+srv.Addr().String()).Open()
	var op *net.OpError
	require.ErrorAs(t, err, &op, "the address is taken")
	require.ErrorContains(t, err, "--metrics: listen tcp "+srv.Addr().String())
}
