package iwtest

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/conn"
)

// The control message layout of PROTOCOL.md §2, byte by byte.
func TestIwtCtrl_Layout(t *testing.T) {
	m := message{Type: msgBuf, Test: TestSendInv, Dir: 1, Status: 4, Iter: 0x01020304, Size: 0x00100000,
		Addr: 0x0000_7f00_dead_beef, STag: 0xabcdef01, Len: 4096}
	b := appendCtrl(nil, &m)
	require.Equal(t, "49575431"+"03"+"05"+"01"+"04"+"01020304"+"00100000"+"00007f00deadbeef"+"abcdef01"+"00001000",
		hex.EncodeToString(b))
	c, err := parseCtrl(b)
	require.NoError(t, err)
	require.Equal(t, m, c.Fields())
}

func TestIwtCtrl_RejectsWhatIsNotAControlMessage(t *testing.T) {
	good := appendCtrl(nil, &message{Type: msgHello})
	for name, b := range map[string][]byte{
		"short":     good[:31],
		"long":      append(bytes.Clone(good), 0),
		"magic":     append([]byte{0x49, 0x57, 0x54, 0x32}, good[4:]...),
		"empty":     nil,
		"data-like": bytes.Repeat([]byte{0xa5}, 32),
	} {
		_, err := parseCtrl(b)
		assert.ErrorIs(t, err, errNotCtrl, name)
	}
}

// Property: every 32-byte message with the magic parses and encodes back
// to the same bytes; everything else is refused without a panic.
func FuzzIwtCtrl(f *testing.F) {
	for _, m := range []message{
		{Type: msgHello, Size: MaxSize, Iter: 3},
		{Type: msgBegin, Test: TestRead, Dir: 1, Iter: 7, Size: 65536, Addr: 1 << 40, STag: 0x100, Len: 65536},
		{Type: msgAck, Test: TestWriteSGE, Status: uint8(stMismatch), Size: 1},
		{Type: 0xff, Test: 0xff, Dir: 0xff, Status: 0xff, Iter: ^uint32(0), Size: ^uint32(0), Addr: ^uint64(0)},
	} {
		f.Add(appendCtrl(nil, &m))
	}
	f.Add([]byte("IWT1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCtrl(b)
		if err != nil {
			if len(b) == ctrlLen && b[0] == 0x49 && b[1] == 0x57 && b[2] == 0x54 && b[3] == 0x31 {
				t.Fatalf("refused a well-formed message: %x", b)
			}
			return
		}
		m := c.Fields()
		if got := appendCtrl(nil, &m); !bytes.Equal(got, b) {
			t.Fatalf("round trip: %x → %x", b, got)
		}
		_ = m.Type.String() + m.Test.String() + status(m.Status).String()
	})
}

// PROTOCOL.md §6 test vectors.
func TestIwtPattern_Vectors(t *testing.T) {
	for _, v := range []struct {
		ph   phase
		want string
	}{
		{phase{test: 1, dir: 0, iter: 0, size: 8}, "bc11211d9712bb31"},
		{phase{test: 3, dir: 1, iter: 2, size: 13}, "2ea232f8ab1a165f0883def6e5"},
	} {
		b := make([]byte, v.ph.size)
		patternFill(b, v.ph.seed(), 0, false)
		assert.Equal(t, v.want, hex.EncodeToString(b))
		assert.Equal(t, -1, patternCheck(b, v.ph.seed(), 0))
	}
}

// A fill starting at any message offset continues the same pattern, and
// the complement differs in every byte.
func TestIwtPattern_Offsets(t *testing.T) {
	seed := phase{test: 6, dir: 1, iter: 9, size: 1000}.seed()
	whole := make([]byte, 1000)
	patternFill(whole, seed, 0, false)
	for _, from := range []int{1, 2, 3, 4, 5, 511, 998} {
		part := make([]byte, len(whole)-from)
		patternFill(part, seed, from, false)
		require.Equal(t, whole[from:], part, "from %d", from)
		require.Equal(t, -1, patternCheck(part, seed, from))
	}
	inv := make([]byte, len(whole))
	patternFill(inv, seed, 0, true)
	for i := range whole {
		require.Equal(t, ^whole[i], inv[i])
	}
	require.Equal(t, 0, patternCheck(inv, seed, 0))
	whole[700] ^= 1
	require.Equal(t, 700, patternCheck(whole, seed, 0))
}

// Pieces are stored in reverse order with gaps, cover the message exactly,
// and the check finds data errors and writes outside the pieces.
func TestIwtLayout(t *testing.T) {
	for _, c := range []struct {
		size uint32
		k    int
		want int
	}{{1, 4, 1}, {3, 4, 3}, {4096, 4, 4}, {10, 1, 1}, {100, 9, MaxSGE}} {
		l := makeLayout(c.size, c.k)
		require.Equal(t, c.want, l.k)
		total := 0
		for j := range l.k {
			total += l.len[j]
			if j > 0 {
				require.Less(t, l.off[j], l.off[j-1], "reverse order")
			}
		}
		require.Equal(t, int(c.size), total)

		ph := phase{test: TestSendSGE, size: c.size}
		src := make([]byte, l.need())
		l.fill(src, ph.seed(), false)
		require.NoError(t, l.check(src, ph.seed()))

		// Gather the pieces in SGE order: the message in order.
		pd := conn.NewPD()
		mr, err := pd.Register(src, conn.LocalWrite)
		require.NoError(t, err)
		var msg []byte
		for _, sge := range l.sges(nil, mr) {
			msg = append(msg, src[sge.Offset:sge.Offset+sge.Length]...)
		}
		want := make([]byte, c.size)
		patternFill(want, ph.seed(), 0, false)
		require.Equal(t, want, msg)

		bad := bytes.Clone(src)
		bad[l.off[0]] ^= 0xff
		require.ErrorContains(t, l.check(bad, ph.seed()), "data mismatch")
		bad = bytes.Clone(src)
		bad[l.span+guardLen-1] = 0
		require.ErrorContains(t, l.check(bad, ph.seed()), "outside the message")
		if l.k > 1 {
			bad = bytes.Clone(src)
			bad[l.off[1]+l.len[1]] = 0 // the gap after the second piece
			require.ErrorContains(t, l.check(bad, ph.seed()), "outside the message")
		}
		require.NoError(t, mr.Deregister())
	}
}

func BenchmarkIwtPatternCheck(b *testing.B) {
	const n = 1 << 20
	seed := phase{test: TestWrite, size: n}.seed()
	buf := make([]byte, n)
	patternFill(buf, seed, 0, false)
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		if patternCheck(buf, seed, 0) != -1 {
			b.Fatal("mismatch")
		}
	}
}
