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
	for _, markers := range []bool{false, true} {
		specs := specs
		if markers {
			specs = append(specs[:len(specs)-1:len(specs)-1], fpduSpec{hdr: tagged(9, 9), payload: bytes.Repeat([]byte{3}, MaxULPDUWithMarkers-14)})
		}
		stream := encode(t, WriterConfig{CRC: true, Markers: markers}, specs)
		cfg := ReaderConfig{CRC: true, Markers: markers, VerifyFirst: true, BufferSize: 1024}
		for _, sizes := range [][]int{{len(stream)}, {1}, {7, 4093}, {511, 2}, {65536}} {
			got := decodeAll(t, &splitReader{data: stream, sizes: sizes}, cfg)
			require.Len(t, got, len(specs))
			for i := range specs {
				require.Equal(t, specs[i].ulpdu(), got[i], "FPDU %d, reads of %v, markers %v", i, sizes, markers)
			}
		}
		r := NewReader(bytes.NewReader(stream), cfg)
		require.GreaterOrEqual(t, len(r.buf), FPDULen(MaxULPDU), "the buffer holds the longest FPDU")
	}
}

// A corrupted FPDU is refused at Next: not one of its bytes, header
// included, reaches the caller, and the stream stays at the error (§8).
func TestReader_RFC5044_6_VerifyFirstRefusesBeforeDelivery(t *testing.T) {
	specs := []fpduSpec{{hdr: tagged(1, 0), payload: []byte("good")}, {hdr: tagged(2, 0), payload: bytes.Repeat([]byte{1}, 5000)}, {hdr: tagged(3, 0), payload: []byte("never")}}
	for _, markers := range []bool{false, true} {
		stream := encode(t, WriterConfig{CRC: true, Markers: markers}, specs)
		first := FPDULen(len(specs[0].ulpdu()))
		ats := []int{first + 3, first + 4000} // in the header, in the payload
		if markers {
			// With a marker at the stream's start and one every 512
			// octets: the second FPDU's header, its payload, and the
			// FPDUPTR of a marker inside it (which the CRC covers).
			ats = []int{first + 4 + 3, first + 4000, 1024 + 3}
		}
		for _, at := range ats {
			refuseCorrupted(t, stream, at, markers, specs[0].ulpdu())
		}
	}
}

func refuseCorrupted(t *testing.T, stream []byte, at int, markers bool, first []byte) {
	t.Helper()
	bad := bytes.Clone(stream)
	bad[at] ^= 0x01
	r := NewReader(bytes.NewReader(bad), ReaderConfig{CRC: true, Markers: markers, VerifyFirst: true})
	u, err := r.ReadFPDU(make([]byte, MaxULPDU))
	require.NoError(t, err)
	require.Equal(t, first, u)
	_, err = r.Next()
	require.ErrorIs(t, err, ErrCRC, "corrupted at %d, markers %v", at, markers)
	_, perr := r.Peek(2)
	require.Error(t, perr, "nothing of the corrupted FPDU can be read")
	_, again := r.Next()
	require.Equal(t, err, again)
}

// VerifyFirst applies to CRC streams of connections (not to decoders that
// read past CRC errors).
func TestReader_VerifyFirstNeedsCRC(t *testing.T) {
	for _, cfg := range []ReaderConfig{{VerifyFirst: true}, {Markers: true, VerifyFirst: true}, {CRC: true, ContinueAfterCRCError: true, VerifyFirst: true}} {
		require.False(t, NewReader(bytes.NewReader(nil), cfg).cfg.VerifyFirst, "%+v", cfg)
	}
}

// With VerifyFirst every byte passes through the Reader's buffer, so it
// holds several of the longest FPDUs: one read then takes what the socket
// holds instead of one FPDU's worth, which cost a read system call (and,
// freeing window, an ACK) per FPDU.
func TestReader_VerifyFirstReadsSeveralFPDUsAtOnce(t *testing.T) {
	for _, markers := range []bool{false, true} {
		n := MaxULPDU - 14
		if markers {
			n = MaxULPDUWithMarkers - 14
		}
		var specs []fpduSpec
		for i := range 16 {
			specs = append(specs, fpduSpec{hdr: tagged(uint32(i), 0), payload: bytes.Repeat([]byte{byte(i)}, n)})
		}
		stream := encode(t, WriterConfig{CRC: true, Markers: markers}, specs)
		src := &splitReader{data: stream, sizes: []int{len(stream)}}
		got := decodeAll(t, src, ReaderConfig{CRC: true, Markers: markers, VerifyFirst: true})
		require.Len(t, got, len(specs))
		for i := range specs {
			require.Equal(t, specs[i].ulpdu(), got[i], "FPDU %d, markers %v", i, markers)
		}
		require.LessOrEqual(t, src.i, len(specs)/2, "reads for %d FPDUs of %d octets, markers %v", len(specs), FPDULen(n+14), markers)
	}
}
