package mpa

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzReader feeds arbitrary bytes to the Reader, with and without CRC and
// markers, through the stepwise API and through ReadFPDU. It must never
// panic, never report a ULPDU longer than the limit, and end every stream
// with io.EOF or a typed error; ULPDUs must match a second pass that reads
// the same bytes one at a time. After a CRC error it must deliver nothing
// more unless ContinueAfterCRCError is set (flags bit 8).
func FuzzReader(f *testing.F) {
	for _, cfg := range []WriterConfig{{}, {CRC: true}, {Markers: true}, {CRC: true, Markers: true}} {
		stream := encode(f, cfg, []fpduSpec{
			{hdr: tagged(1, 0), payload: []byte("payload")},
			{hdr: nil, payload: bytes.Repeat([]byte{7}, 600)},
			{hdr: []byte{0x41, 0x43}},
		})
		var flags uint8
		if cfg.CRC {
			flags |= 1
		}
		if cfg.Markers {
			flags |= 2
		}
		f.Add(stream, flags)
		f.Add(stream[:len(stream)/2], flags)
	}
	f.Add([]byte{0xff, 0xff, 1, 2, 3}, uint8(0))
	f.Add([]byte{0, 0, 0, 0}, uint8(2))
	// A CRC error in the middle of a stream, read with and without the
	// opt-in to continue.
	bad := encode(f, WriterConfig{CRC: true}, []fpduSpec{{payload: []byte("one")}, {payload: []byte("two")}, {payload: []byte("three")}})
	bad[10] ^= 0x40
	f.Add(bad, uint8(1))
	f.Add(bad, uint8(1|8))
	// Markers whose low FPDUPTR bits are set (read as zero, RFC 5044 §4.2).
	low := encode(f, WriterConfig{Markers: true}, []fpduSpec{{payload: bytes.Repeat([]byte{5}, 1100)}, {payload: []byte("x")}})
	low[3] |= 3
	low[515] |= 1
	low[1027] |= 2
	f.Add(low, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		cfg := ReaderConfig{CRC: flags&1 != 0, Markers: flags&2 != 0, BufferSize: 1024, ContinueAfterCRCError: flags&8 != 0}
		if flags&4 != 0 {
			cfg.MaxULPDU = 100
		}
		a := readStream(t, bytes.NewReader(data), cfg, false)
		b := readStream(t, iotest.OneByteReader(bytes.NewReader(data)), cfg, true)
		if len(a) != len(b) {
			t.Fatalf("whole vs one-byte reads: %d vs %d ULPDUs", len(a), len(b))
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("ULPDU %d differs between read patterns", i)
			}
		}
		if !cfg.CRC || cfg.Markers || cfg.ContinueAfterCRCError {
			return
		}
		// RFC 5044 §6: verified first, the same ULPDUs come out, except
		// that one whose CRC fails is not delivered at all.
		vcfg := cfg
		vcfg.VerifyFirst = true
		for _, src := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data))} {
			v, verr := readVerified(t, src, vcfg)
			if len(v) > len(a) {
				t.Fatalf("verified first: %d ULPDUs, cut-through %d", len(v), len(a))
			}
			for i := range v {
				if !bytes.Equal(v[i], a[i]) {
					t.Fatalf("verified first: ULPDU %d differs", i)
				}
			}
			if errors.Is(verr, ErrCRC) && len(v) != len(a)-1 {
				t.Fatalf("verified first: CRC error after %d ULPDUs, cut-through delivered %d", len(v), len(a))
			}
		}
	})
}

// readVerified reads a VerifyFirst stream until its first error and
// returns the ULPDUs delivered and that error (io.EOF at a clean end).
func readVerified(t *testing.T, src io.Reader, cfg ReaderConfig) ([][]byte, error) {
	r := NewReader(src, cfg)
	buf := make([]byte, MaxULPDU)
	var out [][]byte
	for {
		n, err := r.Next()
		if err != nil {
			return out, err
		}
		if !r.verified {
			t.Fatal("Next returned an FPDU not yet verified")
		}
		if err := r.ReadFull(buf[:n]); err != nil {
			return out, err
		}
		if err := r.End(); err != nil {
			t.Fatalf("End after verification: %v", err)
		}
		out = append(out, bytes.Clone(buf[:n]))
	}
}

// readStream reads ULPDUs until the stream ends; stepwise uses Next, Peek,
// Read and End instead of ReadFPDU. CRC errors are skipped over when the
// configuration allows it; otherwise the stream must stay at that error.
func readStream(t *testing.T, src io.Reader, cfg ReaderConfig, stepwise bool) [][]byte {
	limit := cfg.MaxULPDU
	if limit == 0 {
		limit = MaxULPDU
	}
	r := NewReader(src, cfg)
	buf := make([]byte, MaxULPDU)
	var out [][]byte
	for i := 0; ; i++ {
		var (
			u   []byte
			err error
		)
		if stepwise {
			var n int
			n, err = r.Next()
			if err == nil {
				if n > limit {
					t.Fatalf("ULPDU %d over limit %d", n, limit)
				}
				if _, err = r.Peek(min(n, 16)); err == nil {
					u = buf[:n]
					if err = r.ReadFull(u); err == nil {
						err = r.End()
					}
				}
			}
		} else {
			u, err = r.ReadFPDU(buf)
		}
		var pe *Error
		switch {
		case err == nil:
			out = append(out, bytes.Clone(u))
		case errors.Is(err, io.EOF):
			return out
		case errors.Is(err, ErrCRC) && cfg.ContinueAfterCRCError:
			out = append(out, bytes.Clone(u))
		case errors.Is(err, ErrCRC):
			out = append(out, bytes.Clone(u))
			for range 2 {
				if _, again := r.Next(); again != err {
					t.Fatalf("after CRC error %v, Next returned %v", err, again)
				}
			}
			return out
		case errors.As(err, &pe):
			return out
		default:
			t.Fatalf("untyped error %v", err)
		}
		if i > len(buf) {
			t.Fatal("more FPDUs than input bytes")
		}
	}
}

// FuzzFPDURoundTrip frames fuzzer-chosen ULPDUs with every option and reads
// them back: the same ULPDUs must come out, whatever the read pattern.
func FuzzFPDURoundTrip(f *testing.F) {
	f.Add([]byte("header"), []byte("payload"), uint16(3), uint8(3), uint16(7))
	f.Add([]byte{}, []byte{}, uint16(1), uint8(0), uint16(1))
	f.Add(make([]byte, 14), make([]byte, 1500), uint16(5), uint8(2), uint16(509))
	f.Fuzz(func(t *testing.T, hdr, payload []byte, count uint16, flags uint8, chunk uint16) {
		if len(hdr) > MaxHeader {
			hdr = hdr[:MaxHeader]
		}
		// Bounded sizes keep each run short enough for the fuzzer to
		// explore; large ULPDUs are covered by the unit tests.
		if len(payload) > 8192 {
			payload = payload[:8192]
		}
		cfg := WriterConfig{CRC: flags&1 != 0, Markers: flags&2 != 0}
		n := int(count%8) + 1
		var specs []fpduSpec
		for i := 0; i < n; i++ {
			// Vary the sizes so FPDUs land at many stream alignments.
			p := payload[:len(payload)*i/n]
			specs = append(specs, fpduSpec{hdr: hdr, payload: p})
		}
		stream := encode(t, cfg, specs)
		sr := &splitReader{data: stream, sizes: []int{int(chunk%4096) + 1, 3 + int(chunk%509)}}
		got := decodeAll(t, sr, ReaderConfig{CRC: cfg.CRC, Markers: cfg.Markers})
		if len(got) != len(specs) {
			t.Fatalf("%d FPDUs written, %d read", len(specs), len(got))
		}
		for i := range specs {
			if !bytes.Equal(got[i], specs[i].ulpdu()) {
				t.Fatalf("FPDU %d changed", i)
			}
		}
	})
}
