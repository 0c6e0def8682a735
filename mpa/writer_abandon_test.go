package mpa

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriter_Abandon: dropping queued FPDUs tells whether the bytes already
// written end at an FPDU boundary; when they do, the next FPDU continues
// the stream exactly as if the dropped ones had never been queued (marker
// positions included).
func TestWriter_Abandon(t *testing.T) {
	for _, cfg := range []WriterConfig{{}, {CRC: true}, {CRC: true, Markers: true}} {
		hdr := bytes.Repeat([]byte{0xc1}, 18)
		payload := bytes.Repeat([]byte{7}, 700) // long enough to cross a marker
		fpdu := func() int {                    // the first FPDU's length on the wire
			var b bytes.Buffer
			w := NewWriter(&b, cfg)
			require.NoError(t, w.WriteFPDU(hdr, payload))
			require.NoError(t, w.Flush())
			return b.Len()
		}()
		for _, tc := range []struct {
			name     string
			written  int
			boundary bool
		}{
			{"nothing written", 0, true},
			{"first FPDU written", fpdu, true},
			{"first FPDU cut short", fpdu - 1, false},
			{"one byte", 1, false},
		} {
			var sink bytes.Buffer
			w := NewWriter(&sink, cfg)
			for i := 0; i < 3; i++ {
				require.NoError(t, w.WriteFPDU(hdr, payload))
			}
			require.NoError(t, w.Begin(hdr)) // one being built, too
			w.consume(tc.written)            // what a partial writev leaves
			require.Equal(t, tc.boundary, w.Abandon(), "%+v %s", cfg, tc.name)
			require.Zero(t, w.Pending())
			require.Zero(t, w.Buffered())
			if !tc.boundary {
				continue
			}
			// The stream goes on after the written FPDUs: the next FPDU is
			// what a writer that only ever queued those would send next.
			require.NoError(t, w.WriteFPDU(hdr[:4]))
			require.NoError(t, w.Flush())
			var ref bytes.Buffer
			rw := NewWriter(&ref, cfg)
			for i := 0; i < tc.written/max(fpdu, 1); i++ {
				require.NoError(t, rw.WriteFPDU(hdr, payload))
			}
			require.NoError(t, rw.Flush())
			ref.Reset()
			require.NoError(t, rw.WriteFPDU(hdr[:4]))
			require.NoError(t, rw.Flush())
			require.Equal(t, ref.Bytes(), sink.Bytes(), "%+v %s", cfg, tc.name)
		}
	}
}
