package metricshttp

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/promtest"
	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

func TestFlags_Check(t *testing.T) {
	for args, want := range map[string]string{
		"": "", "--metrics 127.0.0.1:0 --metrics-qps": "", "--metrics-qps": "--metrics-qps needs --metrics ADDR",
	} {
		var m Flags
		testutil.ParseFlags(t, m.Register, args)
		if want == "" {
			require.NoError(t, m.Check(), args)
		} else {
			require.EqualError(t, m.Check(), want, args)
		}
	}
}

// Without --metrics there is no endpoint, and the nil Server does
// nothing; with it, the endpoint serves the default device, per queue
// pair with --metrics-qps; an address that cannot be listened on is
// named as --metrics's.
func TestFlags_Open(t *testing.T) {
	var none, qps, taken Flags
	srv, err := none.Open()
	require.NoError(t, err)
	require.Nil(t, srv)
	srv.Close()

	testutil.ParseFlags(t, qps.Register, "--metrics 127.0.0.1:0 --metrics-qps")
	srv, err = qps.Open()
	require.NoError(t, err)
	defer srv.Close()
	s, err := promtest.Scrape("http://" + srv.Addr().String() + "/metrics")
	require.NoError(t, err)
	require.Contains(t, s.Names(), "go_goroutines")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, err = Fetch(context.Background(), client, srv.Addr().String())
	require.NoError(t, err)

	testutil.ParseFlags(t, taken.Register, "--metrics "+srv.Addr().String())
	_, err = taken.Open()
	var op *net.OpError
	require.ErrorAs(t, err, &op, "the address is taken")
	require.ErrorContains(t, err, "--metrics: listen tcp "+srv.Addr().String())
}
