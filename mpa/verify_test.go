package mpa

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 5044 §6: with VerifyFirst a Reader hands out an FPDU only after its
// CRC checked, whatever the read pattern, and reads the same ULPDUs as
// without it.
func TestReader_RFC5044_6_VerifyFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	specs := append(randSpecs(rng, 20, 3000), fpduSpec{hdr: tagged(9, 9), payload: bytes.Repeat([]byte{3}, MaxULPDU-14)})
	stream := encode(t, WriterConfig{CRC: true}, specs)
	cfg := ReaderConfig{CRC: true, VerifyFirst: true, BufferSize: 1024}
	for _, sizes := range [][]int{{len(stream)}, {1}, {7, 4093}, {65536}} {
		got := decodeAll(t, &splitReader{data: stream, sizes: sizes}, cfg)
		require.Len(t, got, len(specs))
		for i := range specs {
			require.Equal(t, specs[i].ulpdu(), got[i], "FPDU %d, reads of %v", i, sizes)
		}
	}
	r := NewReader(bytes.NewReader(stream), cfg)
	require.GreaterOrEqual(t, len(r.buf), FPDULen(MaxULPDU), "the buffer holds the longest FPDU")
}

// A corrupted FPDU is refused at Next: not one of its bytes, header
// included, reaches the caller, and the stream stays at the error (§8).
func TestReader_RFC5044_6_VerifyFirstRefusesBeforeDelivery(t *testing.T) {
	specs := []fpduSpec{{hdr: tagged(1, 0), payload: []byte("good")}, {hdr: tagged(2, 0), payload: bytes.Repeat([]byte{1}, 5000)}, {hdr: tagged(3, 0), payload: []byte("never")}}
	stream := encode(t, WriterConfig{CRC: true}, specs)
	first := FPDULen(len(specs[0].ulpdu()))
	for _, at := range []int{first + 3, first + 4000} { // in the header, in the payload
		bad := bytes.Clone(stream)
		bad[at] ^= 0x01
		r := NewReader(bytes.NewReader(bad), ReaderConfig{CRC: true, VerifyFirst: true})
		u, err := r.ReadFPDU(make([]byte, MaxULPDU))
		require.NoError(t, err)
		require.Equal(t, specs[0].ulpdu(), u)
		_, err = r.Next()
		require.ErrorIs(t, err, ErrCRC, "corrupted at %d", at)
		_, perr := r.Peek(2)
		require.Error(t, perr, "nothing of the corrupted FPDU can be read")
		_, again := r.Next()
		require.Equal(t, err, again)
	}
}

// VerifyFirst applies to CRC streams without markers only.
func TestReader_VerifyFirstNeedsCRC(t *testing.T) {
	for _, cfg := range []ReaderConfig{{VerifyFirst: true}, {CRC: true, Markers: true, VerifyFirst: true}, {CRC: true, ContinueAfterCRCError: true, VerifyFirst: true}} {
		require.False(t, NewReader(bytes.NewReader(nil), cfg).cfg.VerifyFirst, "%+v", cfg)
	}
}
