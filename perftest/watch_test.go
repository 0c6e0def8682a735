package perftest

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
)

// loadByte and loadCredit read what a peer's Write would have placed:
// any byte of a watched region, and a little-endian 4-byte count at the
// start of an 8-byte slot.
func TestWatchedLoads(t *testing.T) {
	mr, err := registerWatched(conn.NewPD(), make([]byte, 64), conn.LocalWrite|conn.RemoteWrite)
	require.NoError(t, err)
	defer mr.Deregister()
	b := mr.Bytes()
	for i := range b {
		b[i] = byte(i + 1)
	}
	for _, off := range []int{0, 1, 7, 8, 13, 63} {
		assert.Equal(t, byte(off+1), loadByte(mr, off), "byte %d", off)
	}
	binary.LittleEndian.PutUint32(b[16:], 198)
	assert.Equal(t, uint32(198), loadCredit(mr, 16))
}
