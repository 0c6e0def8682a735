package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/internal/tlstest"
)

// Inside TLS: iwarp-go's connections and the baseline's streams both run
// over crypto/tls, every message of each phase arrives, and the result
// says so. One configuration serves both roles, mutual authentication
// included, as the command line builds it.
func TestBench_InsideTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "bench CA")
	cfgTLS := ca.Server(t, "bench", ca)
	cfgTLS.RootCAs = ca.Pool
	for _, op := range []string{"write", "send"} {
		t.Run(op, func(t *testing.T) {
			cfg := loopback(op, 1<<20, 40, 30)
			if op == "send" {
				cfg = loopback(op, 8, 300, 50)
			}
			cfg.CompareTCP, cfg.TLS = true, cfgTLS
			cfg.Options = []conn.Option{conn.WithTLS(cfgTLS)}
			m := runJSON(t, cfg)
			require.Equal(t, true, m["tls"])
			require.Equal(t, float64(cfg.Iters), num(t, m, "messages"))
			require.Equal(t, float64(cfg.Iters), num(t, m, "tcp_messages"))
			checkRates(t, m, "", cfg.Size)
			checkRates(t, m, "tcp_", cfg.Size)
			require.Equal(t, float64(cfg.LatIters), num(t, m, "lat_iters"))
			require.Positive(t, num(t, m, "tcp_lat_p50_us"))
		})
	}
}
