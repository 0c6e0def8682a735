package mpa

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// batchWriter records each WriteBuffers call; it fails the test if the
// Writer falls back to Write.
type batchWriter struct {
	t     *testing.T
	calls int
	got   bytes.Buffer
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.t.Fatalf("Write(%d bytes) called on a BuffersWriter", len(p))
	return 0, nil
}

func (b *batchWriter) WriteBuffers(bufs [][]byte) (int64, error) {
	b.calls++
	var n int64
	for _, p := range bufs {
		b.got.Write(p)
		n += int64(len(p))
	}
	return n, nil
}

// A Flush hands a BuffersWriter the whole batch in one call, and the bytes
// are those a plain writer receives.
func TestWriter_BuffersWriterTakesTheBatch(t *testing.T) {
	for _, crc := range []bool{false, true} {
		big := bytes.Repeat([]byte{0xa5}, 3000) // referenced, not inlined
		small := []byte("eight by")
		bw := &batchWriter{t: t}
		var plain bytes.Buffer
		for _, w := range []*Writer{NewWriter(bw, WriterConfig{CRC: crc}), NewWriter(&plain, WriterConfig{CRC: crc})} {
			require.NoError(t, w.WriteFPDU([]byte{1, 2, 3, 4, 5, 6}, big))
			require.NoError(t, w.WriteFPDU([]byte{7, 8, 9, 10, 11, 12}, small, big))
			require.NoError(t, w.Flush())
		}
		require.Equal(t, 1, bw.calls, "crc=%v", crc)
		require.Equal(t, plain.Bytes(), bw.got.Bytes(), "crc=%v", crc)
	}
}
