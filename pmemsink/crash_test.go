//go:build linux || darwin || freebsd

package pmemsink

import (
	"math/rand/v2"
	"testing"

	"github.com/iwarp-go/iwarp-go/pmemsink/crashsim"
	"github.com/stretchr/testify/require"
)

// sinkTarget is the target side of the engine as crashsim drives it: a
// real Sink whose persists go to the simulator's shadow, one Tracker per
// connection, and the engine's rule for each kind of flush.
type sinkTarget struct {
	t        *testing.T
	s        *Sink
	trackers []*Tracker
	// otherConn is a defect: a flush persists the next connection's
	// ranges instead of its own.
	otherConn bool
}

func (x *sinkTarget) Write(conn int, off uint64, data []byte) {
	err := x.s.Guard(func() error {
		Place(x.s.Bytes()[off:], data)
		return nil
	})
	require.NoError(x.t, err)
	x.trackers[conn].Placed(off, uint64(len(data)))
}

func (x *sinkTarget) Flush(conn int, k crashsim.Kind, off, n uint64) func() error {
	tr := x.trackers[conn]
	if x.otherConn {
		tr = x.trackers[(conn+1)%len(x.trackers)]
	}
	switch k {
	case crashsim.ReadAfterWrite:
		if tr.Clean() {
			return nil // a Read on a clean connection costs no persist
		}
		return tr.PersistAll
	case crashsim.FlushWhole:
		return tr.PersistAll
	case crashsim.FlushRange:
		return func() error { return tr.PersistRange(off, n) }
	case crashsim.GPSPM:
		return func() error { return tr.PersistSpan(off, n) }
	}
	panic("kind")
}

type crashCase struct {
	mode      Mode // ModeMsync (page) or ModeDAX (cache line)
	capacity  int  // dirty ranges per tracker
	hooks     *testHooks
	otherConn bool
	ackEarly  bool
}

const (
	crashConns = 3
	crashPages = 8
)

// crashTraces runs up to n traces and returns how many the checker
// rejected (stopping at the first rejection if stopAtFirst) and the first
// error, with totals of what the traces did.
func crashTraces(t *testing.T, c crashCase, n int, seed uint64, stopAtFirst bool) (bad int, acks, widened uint64, first error) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(c.mode)<<8|uint64(c.capacity)))
	dir := memDir(t)
	page := pageSize()
	size := int64(crashPages * page)
	cfg := crashsim.Config{Conns: crashConns, Ops: 150, MaxWrite: int(2*page + 100), AckBeforePersist: c.ackEarly}
	for i := 0; i < n; i++ {
		var sh *crashsim.Shadow
		var proxy shadowProxy
		opts := []Option{WithShadow(&proxy, c.mode), WithTrackerCapacity(c.capacity)}
		if c.hooks != nil {
			opts = append(opts, withHooks(*c.hooks))
		}
		s, err := Open(tpath(dir, "crash"), size, opts...)
		require.NoError(t, err)
		clear(s.Bytes())
		sh = crashsim.NewShadow(int(size), page, 64, s.Bytes())
		proxy.sh = sh
		x := &sinkTarget{t: t, s: s, otherConn: c.otherConn}
		for range crashConns {
			tr, err := s.Attach(nil)
			require.NoError(t, err)
			x.trackers = append(x.trackers, tr)
		}
		res, err := crashsim.Run(rng, cfg, sh, x)
		acks += uint64(res.Acks)
		for _, tr := range x.trackers {
			widened += tr.Stats().Widened
			tr.Detach()
		}
		require.NoError(t, s.Close())
		if err != nil {
			bad++
			if first == nil {
				first = err
			}
			if stopAtFirst {
				return
			}
		}
	}
	return
}

// shadowProxy lets the shadow be created after the sink (it copies from
// the sink's mapping).
type shadowProxy struct{ sh *crashsim.Shadow }

func (p *shadowProxy) Msync(start, length uint64) error { return p.sh.Msync(start, length) }
func (p *shadowProxy) WriteBack(off uint64)             { p.sh.WriteBack(off) }
func (p *shadowProxy) Fence()                           { p.sh.Fence() }

func crashCount(full int) int {
	if raceOn {
		return full / 10
	}
	return full
}

// Every byte covered by an acknowledged flush survives the cut, and no
// acknowledgement precedes its persist: thousands of random traces of
// writes, the four kinds of flush and persists over three connections, for
// msync's pages and DAX's cache lines, with a dirty set small enough to
// widen often and with the default one.
func TestCrash_AcknowledgedFlushesSurvive(t *testing.T) {
	for _, c := range []crashCase{
		{mode: ModeMsync, capacity: 3},
		{mode: ModeDAX, capacity: 3},
		{mode: ModeMsync, capacity: 64},
		{mode: ModeDAX, capacity: 64},
	} {
		t.Run(c.mode.String()+"/cap"+string(rune('0'+c.capacity/10))+string(rune('0'+c.capacity%10)), func(t *testing.T) {
			n := crashCount(500)
			bad, acks, widened, first := crashTraces(t, c, n, 1, false)
			require.NoError(t, first)
			require.Zero(t, bad)
			require.Greater(t, acks, uint64(3*n), "the traces acknowledge flushes")
			if c.capacity == 3 {
				require.Positive(t, widened, "the dirty sets reached their cap")
			}
		})
	}
}

// Each deliberate defect must fail the simulator.
func TestCrash_DefectsAreCaught(t *testing.T) {
	cases := map[string]struct {
		c    crashCase
		want string
	}{
		"ack before persist":                  {crashCase{mode: ModeMsync, capacity: 64, ackEarly: true}, "ack before persist"},
		"ack before persist, dax":             {crashCase{mode: ModeDAX, capacity: 64, ackEarly: true}, "ack before persist"},
		"persist another connection's ranges": {crashCase{mode: ModeMsync, capacity: 64, otherConn: true}, "not durable"},
		"lose a range at the dirty-set cap":   {crashCase{mode: ModeDAX, capacity: 3, hooks: &testHooks{dropAtCap: true}}, "not durable"},
		"misaligned msync":                    {crashCase{mode: ModeMsync, capacity: 64, hooks: &testHooks{misalignMsync: true}}, "not durable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bad, _, _, first := crashTraces(t, tc.c, 300, 2, true)
			require.Positive(t, bad, "the simulator must reject this defect")
			require.ErrorContains(t, first, tc.want)
			t.Logf("caught: %v", first)
		})
	}
}
