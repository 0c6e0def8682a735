package mpa

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// PayloadCopy sends the bytes as they were when it was called, under a
// CRC computed over exactly those bytes, however the source changes
// before the Flush; its storage is given back when the queue is written.
func TestWriter_PayloadCopySendsWhatItCopied(t *testing.T) {
	for _, cfg := range []WriterConfig{{CRC: true}, {CRC: true, Markers: true}} {
		var out bytes.Buffer
		w := NewWriter(&out, cfg)
		src := bytes.Repeat([]byte{0xAB}, 60000)
		small := []byte("small")
		var want [][]byte
		for i, p := range [][]byte{src, small, src[:1000]} {
			hdr := tagged(uint32(i), 0)
			require.NoError(t, w.Begin(hdr))
			require.NoError(t, w.PayloadCopy(p))
			require.NoError(t, w.End())
			want = append(want, append(bytes.Clone(hdr), p...))
		}
		// The 5-byte piece is copied in behind its header, not staged.
		require.Equal(t, 61000, w.Staged())
		clear(src) // changed after framing, before the Flush
		small[0] = 'X'
		require.NoError(t, w.Flush())
		require.Zero(t, w.Staged(), "the blocks went back")
		require.Empty(t, w.st.blocks)
		got := decodeAll(t, &out, ReaderConfig{CRC: true, Markers: cfg.Markers})
		require.Equal(t, want, got, "markers %v", cfg.Markers)
	}
}

// Without the copy the same change makes the CRC fail: what PayloadCopy
// is for.
func TestWriter_PayloadByReferenceSeesLaterChanges(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	src := bytes.Repeat([]byte{0xAB}, inlinePayload+1) // not copied in
	require.NoError(t, w.WriteFPDU(tagged(1, 0), src))
	src[50] = 0
	require.NoError(t, w.Flush())
	_, err := NewReader(&out, ReaderConfig{CRC: true}).ReadFPDU(make([]byte, 2*inlinePayload))
	require.ErrorIs(t, err, ErrCRC)
}

func TestWriter_PayloadCopyLimitsAndAllocs(t *testing.T) {
	w := NewWriter(discard{}, WriterConfig{CRC: true})
	require.NoError(t, w.Begin(tagged(1, 0)))
	require.ErrorIs(t, w.PayloadCopy(make([]byte, MaxULPDU)), ErrFPDUTooLong)
	require.ErrorIs(t, w.PayloadCopy(nil), ErrState, "the FPDU was dropped")
	p, hdr := make([]byte, 30000), tagged(1, 0)
	frame := func() {
		for range 5 { // more than one block per flush
			if err := w.Begin(hdr); err != nil {
				t.Fatal(err)
			}
			if err := w.PayloadCopy(p); err != nil {
				t.Fatal(err)
			}
			if err := w.End(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	frame()
	if !raceEnabled {
		require.Zero(t, testing.AllocsPerRun(100, frame), "nothing is allocated per FPDU in steady state")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
