package crashsim

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	tPage = 4096
	tLine = 64
)

// msync semantics: EINVAL on an unaligned start; whole pages otherwise.
func TestShadow_Msync(t *testing.T) {
	src := make([]byte, 4*tPage)
	sh := NewShadow(len(src), tPage, tLine, src)
	chk := NewChecker(sh, 1)
	src[tPage+10] = 0xaa
	chk.Write(0, tPage+10, 1)

	require.ErrorIs(t, sh.Msync(tPage+1, 10), syscall.EINVAL)
	require.Zero(t, sh.durable(tPage+10))
	require.NoError(t, sh.Msync(tPage, 1)) // one byte covers the page
	require.Equal(t, uint32(1), sh.durable(tPage+10))
	require.Equal(t, byte(0xaa), chk.Recovered()[tPage+10])

	sh.FailNext(syscall.EIO)
	src[0] = 1
	chk.Write(0, 0, 1)
	require.ErrorIs(t, sh.Msync(0, tPage), syscall.EIO)
	require.Zero(t, sh.durable(0), "a failed msync makes nothing durable")
	require.NoError(t, sh.Msync(0, tPage))
	require.Equal(t, uint32(2), sh.durable(0))
}

// A written-back line is durable only at the fence, with the contents it
// had at the write-back.
func TestShadow_WriteBackFence(t *testing.T) {
	src := make([]byte, tPage)
	sh := NewShadow(len(src), tPage, tLine, src)
	chk := NewChecker(sh, 1)
	src[70] = 1
	chk.Write(0, 70, 1)
	sh.WriteBack(100) // line [64, 128)
	src[70] = 2
	chk.Write(0, 70, 1) // after the write-back: not covered by it
	require.Zero(t, sh.durable(70))
	sh.Fence()
	require.Equal(t, uint32(1), sh.durable(70))
	require.Equal(t, byte(1), chk.Recovered()[70])
	require.Zero(t, sh.durable(63))
}

// The checker flags an acknowledgement that precedes the persist, a flush
// that lost bytes, and passes the honest sequence.
func TestChecker_Properties(t *testing.T) {
	t.Run("honest", func(t *testing.T) {
		src := make([]byte, 2*tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		chk := NewChecker(sh, 2)
		src[5] = 9
		chk.Write(0, 5, 1)
		src[tPage] = 7
		chk.Write(1, tPage, 1) // another connection: not covered by conn 0's flush
		id := chk.Flush(0, ReadAfterWrite, 0, 0)
		require.NoError(t, sh.Msync(0, 1))
		chk.Ack(id)
		require.NoError(t, chk.Cut())
	})
	t.Run("ack before persist", func(t *testing.T) {
		src := make([]byte, tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		chk := NewChecker(sh, 1)
		chk.Write(0, 5, 1)
		id := chk.Flush(0, FlushWhole, 0, 0)
		chk.Ack(id)
		require.ErrorContains(t, chk.Err(), "ack before persist")
		require.NoError(t, sh.Msync(0, 1)) // too late
		require.Error(t, chk.Cut())
	})
	t.Run("range flush covers only its range", func(t *testing.T) {
		src := make([]byte, 2*tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		chk := NewChecker(sh, 1)
		chk.Write(0, 5, 1)
		chk.Write(0, tPage+5, 1)
		id := chk.Flush(0, FlushRange, tPage, 100)
		require.NoError(t, sh.Msync(tPage, 100))
		chk.Ack(id)
		require.NoError(t, chk.Cut(), "byte 5 is outside the flushed range")
		id = chk.Flush(0, GPSPM, 0, 100)
		chk.Ack(id)
		require.ErrorContains(t, chk.Cut(), "byte 5")
	})
	t.Run("durable bytes that do not match", func(t *testing.T) {
		src := make([]byte, tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		chk := NewChecker(sh, 1)
		src[3] = 1
		chk.Write(0, 3, 1)
		src[3] = 2 // changed behind the checker's back
		require.NoError(t, sh.Msync(0, tPage))
		require.ErrorContains(t, chk.Cut(), "durable byte 3")
	})
}

// A target that persists everything it is asked to, through the shadow:
// the reference Run must accept.
type wholeTarget struct {
	sh  *Shadow
	src []byte
}

func (w *wholeTarget) Write(_ int, off uint64, data []byte) { copy(w.src[off:], data) }
func (w *wholeTarget) Flush(int, Kind, uint64, uint64) func() error {
	return func() error { return w.sh.Msync(0, uint64(len(w.src))) }
}

// A target that never persists: Run must catch it.
type lyingTarget struct{ src []byte }

func (l *lyingTarget) Write(_ int, off uint64, data []byte) { copy(l.src[off:], data) }
func (l *lyingTarget) Flush(int, Kind, uint64, uint64) func() error {
	return func() error { return nil }
}

func TestRun_ReferenceTargets(t *testing.T) {
	cfg := Config{Conns: 3, Ops: 200, MaxWrite: 3 * tPage}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 200
	if raceOn {
		n = 30
	}
	acks := 0
	for i := 0; i < n; i++ {
		src := make([]byte, 8*tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		res, err := Run(rng, cfg, sh, &wholeTarget{sh: sh, src: src})
		require.NoError(t, err, "trace %d", i)
		acks += res.Acks
	}
	require.Greater(t, acks, 3*n, "the traces acknowledge flushes")

	caught := 0
	for i := 0; i < n; i++ {
		src := make([]byte, 8*tPage)
		sh := NewShadow(len(src), tPage, tLine, src)
		if _, err := Run(rng, cfg, sh, &lyingTarget{src: src}); err != nil {
			caught++
		}
	}
	require.Greater(t, caught, n/2)
}
