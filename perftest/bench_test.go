package perftest

import (
	"testing"
)

// BenchmarkLoopback runs b.N messages of a test between two iwarp-go
// sides over loopback, session setup included (amortised over b.N);
// -benchmem shows what the measuring loops allocate per message.
func BenchmarkLoopback(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"write_bw/4096", Config{Test: WriteBW, Size: 4096}},
		{"read_bw/4096", Config{Test: ReadBW, Size: 4096}},
		{"send_lat/64", Config{Test: SendLat, Size: 64}},
		{"read_lat/64", Config{Test: ReadLat, Size: 64}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := c.cfg
			cfg.Iters = max(b.N, MinIters)
			b.ReportAllocs()
			b.SetBytes(int64(cfg.Size))
			r := runPair(b, cfg)
			if r.clientErr != nil || r.serverErr != nil {
				b.Fatal(r.clientErr, r.serverErr)
			}
		})
	}
}
