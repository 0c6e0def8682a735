package conn

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// chunkRecorder keeps every Write's bytes.
type chunkRecorder struct {
	all    bytes.Buffer
	writes []int
}

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.all.Write(p)
	c.writes = append(c.writes, len(p))
	return len(p), nil
}

// writeRecords passes every byte through in order, and every Write but the
// last is a whole number of records: what makes crypto/tls seal full
// records rather than one per FPDU piece.
func TestTLS_WriteRecordsWholeRecords(t *testing.T) {
	const record = 64 // a small record, so that the cases stay small
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		var bufs [][]byte
		var want bytes.Buffer
		for range rng.IntN(8) {
			b := make([]byte, rng.IntN(5*record))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			bufs = append(bufs, b)
			want.Write(b)
		}
		var rec chunkRecorder
		n, err := writeRecords(&rec, make([]byte, 0, record), bufs)
		require.NoError(t, err)
		require.Equal(t, int64(want.Len()), n, "trial %d", trial)
		require.Equal(t, want.Bytes(), rec.all.Bytes(), "trial %d", trial)
		for i, w := range rec.writes {
			require.Positive(t, w)
			if i < len(rec.writes)-1 {
				require.Zero(t, w%record, "trial %d: write %d of %d is %d bytes", trial, i, len(rec.writes), w)
			}
		}
	}
}
