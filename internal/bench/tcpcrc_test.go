package bench

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The CRC baseline sends each message with the CRC32c of each 64 KiB of
// it behind, and the receiver checks them: a damaged byte anywhere in the
// covered part fails the read, a damaged length prefix (not covered) does
// not.
func TestCRCBaseline_FramingAndCheck(t *testing.T) {
	for _, size := range []int{1, 100, crcPiece, crcPiece + 1, 3*crcPiece + 7} {
		msg := make([]byte, 4+size)
		fill(msg)
		var wire bytes.Buffer
		s := newCRCSender(msg, 4)
		require.NoError(t, s.write(&wire))
		require.NoError(t, s.write(&wire), "the sender is reusable")
		pieces := crcPieces(size)
		require.Equal(t, 2*(4+size+4*pieces), wire.Len())
		// The sums are CRC32c (Castagnoli) of each piece, big-endian.
		sums := wire.Bytes()[4+size : 4+size+4*pieces]
		require.Equal(t, crc32.Checksum(msg[4:4+min(size, crcPiece)], crc32.MakeTable(crc32.Castagnoli)), binary.BigEndian.Uint32(sums))

		read := func(b []byte) error {
			r := newCRCReceiver(bytes.NewReader(b), size)
			hdr := make([]byte, 4)
			if _, err := io.ReadFull(r.r, hdr); err != nil {
				return err
			}
			return r.read(make([]byte, size))
		}
		one := wire.Bytes()[:wire.Len()/2]
		require.NoError(t, read(one))
		for _, at := range []int{4, 4 + size/2, 4 + size - 1, 4 + size} {
			damaged := bytes.Clone(one)
			damaged[at] ^= 0x20
			require.ErrorIs(t, read(damaged), errBaselineCRC, "size %d, byte %d", size, at)
		}
		damaged := bytes.Clone(one)
		damaged[0] ^= 1
		require.NoError(t, read(damaged), "the prefix is not covered")
		require.ErrorIs(t, read(one[:len(one)-1]), io.ErrUnexpectedEOF, "sums cut short")
	}
	r := newCRCReceiver(bytes.NewReader(nil), 10)
	require.ErrorIs(t, r.read(make([]byte, 10)), io.EOF, "the end of the stream between messages")
}

func TestCRCBaseline_NoAllocs(t *testing.T) {
	msg := make([]byte, 2*crcPiece)
	s := newCRCSender(msg, 0)
	r := newCRCReceiver(nil, len(msg))
	var wire bytes.Buffer
	wire.Grow(4 * len(msg))
	buf := make([]byte, len(msg))
	allocs := testing.AllocsPerRun(20, func() {
		wire.Reset()
		if err := s.write(&wire); err != nil {
			t.Fatal(err)
		}
		r.r = &wire
		if err := r.read(buf); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
