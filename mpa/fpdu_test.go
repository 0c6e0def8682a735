package mpa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// tagged returns a 14-byte DDP tagged header (RDMA Write, last segment).
func tagged(stag uint32, to uint64) []byte {
	h := []byte{0xc1, 0x40}
	h = binary.BigEndian.AppendUint32(h, stag)
	return binary.BigEndian.AppendUint64(h, to)
}

type fpduSpec struct {
	hdr     []byte
	payload []byte
}

func (f fpduSpec) ulpdu() []byte { return append(append([]byte{}, f.hdr...), f.payload...) }

// encode frames specs with a fresh Writer.
func encode(t testing.TB, cfg WriterConfig, specs []fpduSpec) []byte {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out, cfg)
	for _, s := range specs {
		require.NoError(t, w.WriteFPDU(s.hdr, s.payload))
	}
	require.NoError(t, w.Flush())
	return out.Bytes()
}

// decodeAll reads every FPDU with ReadFPDU until io.EOF.
func decodeAll(t testing.TB, r io.Reader, cfg ReaderConfig) [][]byte {
	t.Helper()
	rd := NewReader(r, cfg)
	var out [][]byte
	buf := make([]byte, MaxULPDU)
	for {
		u, err := rd.ReadFPDU(buf)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, bytes.Clone(u))
	}
}

func randSpecs(rng *rand.Rand, n, maxPayload int) []fpduSpec {
	specs := make([]fpduSpec, n)
	for i := range specs {
		p := make([]byte, rng.IntN(maxPayload+1))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		specs[i] = fpduSpec{hdr: tagged(uint32(i), uint64(i)*4096), payload: p}
	}
	return specs
}

// The zero-length RDMA Write RTR siw sends (STag 1, TO 0), with and without
// CRC; the CRC value was computed independently with Go's crc32 package.
func TestFPDU_RFC5044_4_SiwRTRBytes(t *testing.T) {
	hdr := tagged(1, 0)
	plain := encode(t, WriterConfig{}, []fpduSpec{{hdr: hdr}})
	require.Equal(t, testutil.Unhex(t, "00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00"), plain)
	withCRC := encode(t, WriterConfig{CRC: true}, []fpduSpec{{hdr: hdr}})
	require.Equal(t, testutil.Unhex(t, "00 0e c1 40 00 00 00 01 00 00 00 00 00 00 00 00 eb d3 4c 5f"), withCRC)

	u, err := NewReader(bytes.NewReader(withCRC), ReaderConfig{CRC: true}).ReadFPDU(make([]byte, 64))
	require.NoError(t, err)
	require.Equal(t, hdr, u)
}

// CRC32c test vectors (RFC 3720 B.4) in the byte order MPA puts on the wire.
func TestFPDU_RFC5044_4_CRCByteOrder(t *testing.T) {
	ones := bytes.Repeat([]byte{0xff}, 32)
	inc := make([]byte, 32)
	for i := range inc {
		inc[i] = byte(i)
	}
	for _, v := range []struct {
		in   []byte
		wire string
	}{
		{make([]byte, 32), "aa 36 91 8a"},
		{ones, "43 ab a8 62"},
		{inc, "4e 79 dd 46"},
	} {
		c := crc32.Checksum(v.in, castagnoli)
		require.Equal(t, testutil.Unhex(t, v.wire), binary.LittleEndian.AppendUint32(nil, c))
	}
}

func TestFPDU_RFC5044_4_1_Pad(t *testing.T) {
	for _, tc := range []struct{ ulpdu, pad, total int }{
		{0, 2, 8}, {1, 1, 8}, {2, 0, 8}, {3, 3, 12}, {14, 0, 20}, {18, 0, 24}, {34, 0, 40},
		{46, 0, 52}, {20, 2, 28}, {22, 0, 28}, {4114, 0, 4120}, {65535, 3, 65544},
	} {
		require.Equal(t, tc.pad, padLen(tc.ulpdu), "ULPDU %d", tc.ulpdu)
		require.Equal(t, tc.total, FPDULen(tc.ulpdu), "ULPDU %d", tc.ulpdu)
		b := encode(t, WriterConfig{}, []fpduSpec{{hdr: nil, payload: bytes.Repeat([]byte{7}, tc.ulpdu)}})
		require.Len(t, b, tc.total)
		require.Equal(t, make([]byte, tc.pad+crcLen), b[lengthLen+tc.ulpdu:], "pad and CRC field are zero")
	}
}

// Pad bytes are ignored on receipt (siw sends stale bytes on one path)
// but covered by the CRC.
func TestFPDU_RFC5044_4_1_PadContentIgnored(t *testing.T) {
	b := encode(t, WriterConfig{}, []fpduSpec{{hdr: []byte{1}}}) // ULPDU 1, pad 1
	b[3] = 0xee
	u := decodeAll(t, bytes.NewReader(b), ReaderConfig{})
	require.Equal(t, [][]byte{{1}}, u)
	// With CRC, the CRC over the dirty pad must match.
	b = encode(t, WriterConfig{}, []fpduSpec{{hdr: []byte{1}}})
	b[3] = 0xee
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[:4], castagnoli))
	require.Equal(t, [][]byte{{1}}, decodeAll(t, bytes.NewReader(b), ReaderConfig{CRC: true}))
}

func TestFPDU_RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specs := randSpecs(rng, 60, 3000)
	specs = append(specs, fpduSpec{hdr: nil}, fpduSpec{hdr: tagged(9, 9), payload: make([]byte, MaxULPDUWithMarkers-14)})
	for _, cfg := range []WriterConfig{{}, {CRC: true}, {Markers: true}, {CRC: true, Markers: true}} {
		t.Run(fmt.Sprintf("crc=%v,markers=%v", cfg.CRC, cfg.Markers), func(t *testing.T) {
			specs := specs
			if !cfg.Markers {
				specs = append(specs[:len(specs):len(specs)], fpduSpec{payload: make([]byte, MaxULPDU)})
			}
			stream := encode(t, cfg, specs)
			rcfg := ReaderConfig{CRC: cfg.CRC, Markers: cfg.Markers}
			for _, wrap := range []struct {
				name string
				f    func(io.Reader) io.Reader
			}{
				{"whole", func(r io.Reader) io.Reader { return r }},
				{"one byte", iotest.OneByteReader},
				{"half", iotest.HalfReader},
				{"data+EOF", iotest.DataErrReader},
			} {
				got := decodeAll(t, wrap.f(bytes.NewReader(stream)), rcfg)
				require.Len(t, got, len(specs), wrap.name)
				for i := range specs {
					require.Equal(t, specs[i].ulpdu(), got[i], "%s: FPDU %d", wrap.name, i)
				}
			}
		})
	}
}

// splitReader hands out its data in the given chunk sizes, cycling.
type splitReader struct {
	data  []byte
	sizes []int
	i     int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(s.data), s.sizes[s.i%len(s.sizes)])
	s.i++
	copy(p, s.data[:n])
	s.data = s.data[n:]
	return n, nil
}

// Every place a segment boundary can fall, inside the length field,
// header, payload, pad, CRC or a marker, gives the same ULPDUs.
func TestFPDU_SplitAtEveryOffset(t *testing.T) {
	specs := []fpduSpec{
		{hdr: tagged(1, 2), payload: []byte("abc")},
		{hdr: tagged(3, 4), payload: bytes.Repeat([]byte{'x'}, 700)},
		{hdr: []byte{0x41, 0x43}, payload: nil},
	}
	for _, cfg := range []WriterConfig{{CRC: true}, {CRC: true, Markers: true}} {
		stream := encode(t, cfg, specs)
		for cut := 1; cut < len(stream); cut++ {
			r := &splitReader{data: stream, sizes: []int{cut, len(stream)}}
			got := decodeAll(t, r, ReaderConfig{CRC: cfg.CRC, Markers: cfg.Markers})
			require.Len(t, got, len(specs), "cut %d", cut)
			for i := range specs {
				require.Equal(t, specs[i].ulpdu(), got[i], "cut %d markers %v FPDU %d", cut, cfg.Markers, i)
			}
		}
	}
}

func TestReader_StepwiseAPI(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 10)
	stream := encode(t, WriterConfig{CRC: true}, []fpduSpec{
		{hdr: tagged(0x1234, 0x10), payload: payload},
		{hdr: tagged(5, 6), payload: []byte("tail")},
	})
	r := NewReader(bytes.NewReader(stream), ReaderConfig{CRC: true})

	_, err := r.Peek(2)
	require.ErrorIs(t, err, ErrState, "Peek before Next")
	n, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, 14+len(payload), n)
	h, err := r.Peek(14)
	require.NoError(t, err)
	require.Equal(t, tagged(0x1234, 0x10), h)
	_, err = r.Peek(MaxPeek + 1)
	require.ErrorIs(t, err, ErrState)
	require.NoError(t, r.Discard(14))
	dst := make([]byte, 30)
	require.NoError(t, r.ReadFull(dst))
	require.Equal(t, payload[:30], dst)
	require.Equal(t, len(payload)-30, r.Remaining())
	require.ErrorIs(t, r.ReadFull(make([]byte, r.Remaining()+1)), ErrState)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrState, "Next before End")
	require.NoError(t, r.End(), "End skips the rest and checks the CRC")

	n, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, 18, n)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, append(tagged(5, 6), "tail"...), rest)
	require.NoError(t, r.End())
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestReader_ReadFPDUShortBuffer(t *testing.T) {
	stream := encode(t, WriterConfig{CRC: true}, []fpduSpec{{payload: make([]byte, 100)}, {payload: []byte("ok")}})
	r := NewReader(bytes.NewReader(stream), ReaderConfig{CRC: true})
	_, err := r.ReadFPDU(make([]byte, 10))
	require.ErrorIs(t, err, io.ErrShortBuffer)
	u, err := r.ReadFPDU(make([]byte, 10))
	require.NoError(t, err, "the skipped FPDU did not desynchronise the stream")
	require.Equal(t, "ok", string(u))
}

// recordingReader remembers the slices it was asked to fill.
type recordingReader struct {
	r     io.Reader
	calls [][]byte
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	rr.calls = append(rr.calls, p)
	return rr.r.Read(p)
}

// A large payload read that finds the buffer empty goes straight into the
// destination: the underlying reader is handed a slice of dst.
func TestReader_LargePayloadBypassesBuffer(t *testing.T) {
	payload := bytes.Repeat([]byte{0x5a}, 60000)
	stream := encode(t, WriterConfig{CRC: true}, []fpduSpec{{hdr: tagged(1, 0), payload: payload}})
	rr := &recordingReader{r: &splitReader{data: stream, sizes: []int{16, 1 << 20}}}
	r := NewReader(rr, ReaderConfig{CRC: true, BufferSize: 4096})
	_, err := r.Next()
	require.NoError(t, err)
	h, err := r.Peek(14)
	require.NoError(t, err)
	require.Equal(t, tagged(1, 0), h)
	require.NoError(t, r.Discard(14))
	dst := make([]byte, len(payload))
	require.NoError(t, r.ReadFull(dst))
	require.NoError(t, r.End())
	require.Equal(t, payload, dst)

	direct := false
	for _, p := range rr.calls {
		if len(p) > 0 && &p[0] == &dst[0] {
			direct = true
			require.Equal(t, len(payload), len(p), "the direct read is bounded by the payload")
		}
	}
	require.True(t, direct, "payload was read directly into dst")
}

// crcErrorStream holds three FPDUs with CRC; the second fails its check.
func crcErrorStream(t *testing.T) []byte {
	stream := encode(t, WriterConfig{CRC: true}, []fpduSpec{{hdr: tagged(1, 1), payload: []byte("good")},
		{hdr: tagged(2, 2), payload: []byte("flip")}, {hdr: tagged(3, 3), payload: []byte("next")}})
	stream[24+16] ^= 0x01 // a payload byte of the second FPDU (first is 24 bytes)
	return stream
}

// RFC 5044 §8: "Once MPA delivers an error of any type, it MUST NOT pass or
// deliver any additional FPDUs on that half connection." After a CRC error
// the Reader returns that error, and reads nothing more from the stream.
func TestReader_RFC5044_8_NoFPDUAfterCRCError(t *testing.T) {
	stream := crcErrorStream(t)
	src := bytes.NewReader(stream)
	r := NewReader(src, ReaderConfig{CRC: true})
	buf := make([]byte, 64)
	_, err := r.ReadFPDU(buf)
	require.NoError(t, err)
	_, err = r.ReadFPDU(buf)
	require.ErrorIs(t, err, ErrCRC)
	first := err
	left := src.Len() + r.Buffered()
	for range 3 {
		_, err = r.Next()
		require.ErrorIs(t, err, ErrCRC, "the third FPDU is not delivered")
		require.Same(t, first, err)
		_, err = r.ReadFPDU(buf)
		require.ErrorIs(t, err, ErrCRC)
	}
	require.Equal(t, 24, left, "the third FPDU is still unread")
	require.Equal(t, left, src.Len()+r.Buffered(), "nothing more was consumed")
	_, err = r.Peek(1)
	require.ErrorIs(t, err, ErrState)
}

// A capture decoder opts in to reading past a CRC error; the stream stays
// framed.
func TestReader_CRCErrorIsReportedAndStreamContinues(t *testing.T) {
	r := NewReader(bytes.NewReader(crcErrorStream(t)), ReaderConfig{CRC: true, ContinueAfterCRCError: true})
	buf := make([]byte, 64)
	_, err := r.ReadFPDU(buf)
	require.NoError(t, err)
	_, err = r.ReadFPDU(buf)
	require.ErrorIs(t, err, ErrCRC)
	var pe *Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, termcode.MPACRC, pe.Code)
	require.Equal(t, termcode.Code(0x2002), pe.Code)
	u, err := r.ReadFPDU(buf)
	require.NoError(t, err)
	require.Equal(t, append(tagged(3, 3), "next"...), u)
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)

	// Without CRC the field is not looked at, whatever it holds.
	junk := encode(t, WriterConfig{}, []fpduSpec{{hdr: tagged(1, 1), payload: []byte("good")}})
	copy(junk[len(junk)-4:], []byte{0xde, 0xad, 0xbe, 0xef})
	require.Len(t, decodeAll(t, bytes.NewReader(junk), ReaderConfig{}), 1)
}

func TestReader_ULPDUOverLimit(t *testing.T) {
	stream := encode(t, WriterConfig{}, []fpduSpec{{payload: make([]byte, 200)}})
	r := NewReader(bytes.NewReader(stream), ReaderConfig{MaxULPDU: 100})
	_, err := r.Next()
	require.ErrorIs(t, err, ErrULPDULength)
	require.Equal(t, termcode.Code(0x2003), err.(*Error).Code)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrULPDULength, "the stream stays broken")
}

// A stream that ends inside an FPDU, at any offset, is a lost connection
// (LLP error 0x01); one that ends between FPDUs is a clean io.EOF.
func TestReader_TornStream(t *testing.T) {
	for _, markers := range []bool{false, true} {
		specs := []fpduSpec{{hdr: tagged(1, 1), payload: []byte("a")}, {hdr: tagged(2, 2), payload: make([]byte, 600)}}
		stream := encode(t, WriterConfig{CRC: true, Markers: markers}, specs)
		first := len(encode(t, WriterConfig{CRC: true, Markers: markers}, specs[:1]))
		for cut := 0; cut < len(stream); cut++ {
			r := NewReader(bytes.NewReader(stream[:cut]), ReaderConfig{CRC: true, Markers: markers})
			var err error
			for err == nil {
				_, err = r.ReadFPDU(make([]byte, 1024))
			}
			if cut == 0 || cut == first {
				require.ErrorIs(t, err, io.EOF, "cut %d markers %v", cut, markers)
				continue
			}
			require.ErrorIs(t, err, ErrConnectionLost, "cut %d markers %v", cut, markers)
			require.Equal(t, termcode.Code(0x2001), err.(*Error).Code)
		}
	}
}

func TestReader_OtherIOErrorsPassThrough(t *testing.T) {
	boom := errors.New("connection reset")
	stream := encode(t, WriterConfig{}, []fpduSpec{{payload: []byte("abcd")}})
	r := NewReader(io.MultiReader(bytes.NewReader(stream[:5]), iotest.ErrReader(boom)), ReaderConfig{})
	_, err := r.ReadFPDU(make([]byte, 10))
	require.ErrorIs(t, err, boom)
	var pe *Error
	require.False(t, errors.As(err, &pe))
}

func TestWriter_UsageErrors(t *testing.T) {
	w := NewWriter(io.Discard, WriterConfig{})
	require.ErrorIs(t, w.Payload([]byte("x")), ErrState)
	require.ErrorIs(t, w.End(), ErrState)
	require.ErrorIs(t, w.Begin(make([]byte, MaxHeader+1)), ErrState)
	require.NoError(t, w.Begin(nil))
	require.ErrorIs(t, w.Begin(nil), ErrState)
	require.ErrorIs(t, w.Flush(), ErrState)
	require.NoError(t, w.End())
	require.NoError(t, w.Flush())
}

func TestWriter_ULPDUTooLongIsAnError(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	require.NoError(t, w.WriteFPDU([]byte{1}, []byte("kept")))
	require.NoError(t, w.Begin(tagged(1, 1)))
	require.NoError(t, w.Payload(make([]byte, 60000)))
	err := w.Payload(make([]byte, 6000))
	require.ErrorIs(t, err, ErrFPDUTooLong)
	require.ErrorIs(t, w.End(), ErrState, "the FPDU was dropped")
	require.Equal(t, 1, w.Pending())
	require.NoError(t, w.WriteFPDU([]byte{2}, []byte("also kept")))
	require.NoError(t, w.Flush())
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Equal(t, [][]byte{[]byte("\x01kept"), []byte("\x02also kept")}, got)

	wm := NewWriter(io.Discard, WriterConfig{Markers: true})
	require.NoError(t, wm.Begin(nil))
	require.ErrorIs(t, wm.Payload(make([]byte, MaxULPDUWithMarkers+1)), ErrFPDUTooLong)
}

// Header bytes are copied at Begin; the caller may reuse its header buffer
// at once.
func TestWriter_CopiesHeader(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	hdr := tagged(7, 7)
	require.NoError(t, w.WriteFPDU(hdr, []byte("p")))
	copy(hdr, tagged(8, 8))
	require.NoError(t, w.WriteFPDU(hdr, []byte("q")))
	require.NoError(t, w.Flush())
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Equal(t, append(tagged(7, 7), 'p'), got[0])
	require.Equal(t, append(tagged(8, 8), 'q'), got[1])
}

// Enough FPDUs to need several arena blocks before one Flush: slices
// queued from the first block must still be intact.
func TestWriter_ArenaGrowthKeepsQueuedHeaders(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	var specs []fpduSpec
	for i := 0; i < 2000; i++ { // ~ 2000*(16+6) bytes of arena, several blocks
		specs = append(specs, fpduSpec{hdr: tagged(uint32(i), uint64(i)), payload: []byte{byte(i)}})
	}
	for _, s := range specs {
		require.NoError(t, w.WriteFPDU(s.hdr, s.payload))
	}
	require.Greater(t, len(w.a.chunks), 2)
	blocks := len(w.a.chunks)
	require.NoError(t, w.Flush())
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Len(t, got, len(specs))
	for i := range specs {
		require.Equal(t, specs[i].ulpdu(), got[i])
	}
	// The same batch again takes as many blocks as the first.
	for _, s := range specs {
		require.NoError(t, w.WriteFPDU(s.hdr, s.payload))
	}
	require.Equal(t, blocks, len(w.a.chunks))
}

// A trailer and the next FPDU's header share one iovec: a batch of small
// FPDUs costs two iovecs each, not three.
func TestWriter_CoalescesArenaIovecs(t *testing.T) {
	w := NewWriter(io.Discard, WriterConfig{CRC: true})
	p := make([]byte, inlinePayload+1) // queued by reference
	for i := 0; i < 10; i++ {
		require.NoError(t, w.WriteFPDU(tagged(1, 1), p))
	}
	require.Len(t, w.bufs, 21, "header, payload, then trailer and the next header as one")
	require.Equal(t, 10, w.Pending())
	require.Equal(t, 10*FPDULen(14+len(p)), w.Buffered())
	require.NoError(t, w.Flush())
	require.Zero(t, w.Buffered())
}

// Small payloads are copied in behind their headers, so a batch of small
// FPDUs is one iovec (one write); a small piece after a referenced one is
// not, so the ULPDU keeps its order; and the copies stay in the first half
// of the arena's first block, so they never make it grow.
func TestWriter_InlinesSmallPayloads(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	small := []byte("12345678")
	for i := 0; i < 10; i++ {
		require.NoError(t, w.WriteFPDU(tagged(1, uint64(i)), small, small))
	}
	require.Len(t, w.bufs, 1)
	small[0] = 'X' // copied: the change is not sent
	big := bytes.Repeat([]byte{0xCD}, inlinePayload+1)
	require.NoError(t, w.WriteFPDU(tagged(2, 0), big, []byte("tail")))
	require.Len(t, w.bufs, 4, "the run so far, big, \"tail\", the trailer")
	require.NoError(t, w.Flush())
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Len(t, got, 11)
	for i := 0; i < 10; i++ {
		require.Equal(t, append(tagged(1, uint64(i)), "1234567812345678"...), got[i])
	}
	require.Equal(t, append(append(tagged(2, 0), big...), "tail"...), got[10])

	for i := 0; i < 1000; i++ {
		require.NoError(t, w.WriteFPDU(tagged(1, 1), make([]byte, inlinePayload)))
	}
	headersOnly := (1000*(lengthLen+14+crcLen) + arenaChunk - 1) / arenaChunk
	require.LessOrEqual(t, len(w.a.chunks), headersOnly+1)
	require.NoError(t, w.Flush())
}

// An idle Writer holds no shared arena block: each goes back to the shared
// free list once the queue is written (or the only FPDU is dropped), and
// comes back for the next batch; only the arena's own small block stays.
func TestWriter_IdleHoldsNoSharedArenaBlock(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	onlySmall := func(msg string) {
		t.Helper()
		require.LessOrEqual(t, len(w.a.chunks), 1, msg)
		if len(w.a.chunks) == 1 {
			require.Same(t, &w.a.small[0], &w.a.chunks[0][0], msg)
		}
	}
	require.Empty(t, w.a.chunks, "before the first FPDU")
	for i := 0; i < 2000; i++ { // several blocks
		require.NoError(t, w.WriteFPDU(tagged(1, uint64(i)), []byte("abc")))
	}
	require.Greater(t, len(w.a.chunks), 2)
	require.NoError(t, w.Flush())
	onlySmall("after Flush")
	require.Len(t, decodeAll(t, &out, ReaderConfig{CRC: true}), 2000)

	require.NoError(t, w.Begin(make([]byte, MaxHeader))) // larger than the small block
	require.Len(t, w.a.chunks, 2)
	require.ErrorIs(t, w.Payload(make([]byte, MaxULPDU)), ErrFPDUTooLong)
	onlySmall("after a dropped FPDU with nothing queued")

	require.NoError(t, w.WriteFPDU(make([]byte, MaxHeader), []byte("xyz")))
	require.Len(t, w.a.chunks, 2)
	require.True(t, w.Abandon())
	onlySmall("after Abandon")

	require.NoError(t, w.WriteFPDU(tagged(1, 8), []byte("again")))
	require.NoError(t, w.Flush())
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Equal(t, [][]byte{append(tagged(1, 8), "again"...)}, got)
}

// A small batch — a Write, its announcing Send, their trailers — fits the
// arena's own block, so it takes nothing from the free list shared by
// every Writer, whose lock was two contended atomics per ping-pong post.
func TestWriter_SmallBatchTakesNoSharedBlock(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, WriterConfig{CRC: true})
	for round := 0; round < 3; round++ {
		require.NoError(t, w.WriteFPDU(tagged(1, uint64(round)), []byte("12345678")))
		require.NoError(t, w.WriteFPDU(tagged(2, 0)))
		require.Len(t, w.a.chunks, 1)
		require.Same(t, &w.a.small[0], &w.a.chunks[0][0])
		require.Len(t, w.bufs, 1, "one iovec for the batch")
		require.NoError(t, w.Flush())
	}
	got := decodeAll(t, &out, ReaderConfig{CRC: true})
	require.Len(t, got, 6)
	require.Equal(t, append(tagged(1, 2), "12345678"...), got[4])
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("broken pipe")
	}
	f.n--
	return len(p), nil
}

func TestWriter_WriteErrorIsSticky(t *testing.T) {
	w := NewWriter(&failWriter{n: 0}, WriterConfig{})
	require.NoError(t, w.WriteFPDU([]byte{1}, []byte("abc")))
	require.Error(t, w.Flush())
	require.Error(t, w.Begin(nil))
	require.Error(t, w.Flush())
}

func TestFPDU_ZeroAllocs(t *testing.T) {
	for _, cfg := range []WriterConfig{{}, {CRC: true}, {Markers: true, CRC: true}} {
		payload := make([]byte, 4096)
		hdr := tagged(1, 0)
		w := NewWriter(io.Discard, cfg)
		// warm up: grow the arena and the iovec slice once
		for i := 0; i < 8; i++ {
			require.NoError(t, w.WriteFPDU(hdr, payload))
		}
		require.NoError(t, w.Flush())
		allocs := testing.AllocsPerRun(200, func() {
			for i := 0; i < 8; i++ {
				_ = w.Begin(hdr)
				_ = w.Payload(payload)
				_ = w.End()
			}
			_ = w.Flush()
		})
		require.Zero(t, allocs, "writer %+v", cfg)

		stream := encode(t, cfg, []fpduSpec{{hdr: hdr, payload: payload}})
		lr := &loopReader{data: stream}
		r := NewReader(lr, ReaderConfig{CRC: cfg.CRC, Markers: cfg.Markers})
		dst := make([]byte, len(payload))
		// Markers count from the stream start, so a marker stream can only
		// be replayed FPDU by FPDU when each FPDU is a whole number of
		// marker intervals; measure the reader without markers.
		if cfg.Markers {
			continue
		}
		allocs = testing.AllocsPerRun(200, func() {
			if _, err := r.Next(); err != nil {
				panic(err)
			}
			if err := r.Discard(14); err != nil {
				panic(err)
			}
			if err := r.ReadFull(dst); err != nil {
				panic(err)
			}
			if err := r.End(); err != nil {
				panic(err)
			}
		})
		require.Zero(t, allocs, "reader %+v", cfg)
	}
}

// loopReader replays data forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// zeroReader never returns data and never fails.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReader_NoProgressIsAnError(t *testing.T) {
	_, err := NewReader(zeroReader{}, ReaderConfig{}).Next()
	require.ErrorIs(t, err, io.ErrNoProgress)
}
