//go:build linux || darwin || freebsd

package pmemsink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
	"github.com/iwarp-go/iwarp-go/pmemsink/crashsim"
	"github.com/iwarp-go/iwarp-go/rpma"
	"github.com/stretchr/testify/require"
)

// The crash simulator driven from the network path: initiators post
// batches of RDMA Writes, Flush Requests (range and whole region), GPSPM
// requests, read-after-write Reads and plain Reads over several
// connections without waiting in between, so that persists run late and
// interleave with later writes; the served sink's persists go to a shadow;
// the target's Registration tells a crashsim.Checker of every placement,
// flush received and acknowledgement sent; the power is cut at a random
// moment while traffic flows.

// netObserver feeds the checker from the registration's instrumentation.
type netObserver struct{ chk *crashsim.Checker }

func (o netObserver) placed(c int, off, n uint64) { o.chk.Write(c, off, n) }

func (o netObserver) flushed(c int, k flushKind, off, n uint64) int {
	kind := map[flushKind]crashsim.Kind{kindRead: crashsim.ReadAfterWrite, kindFlush: crashsim.FlushRange, kindGPSPM: crashsim.GPSPM}[k]
	return int(o.chk.Flush(c, kind, off, n))
}

func (o netObserver) acked(id int) { o.chk.Ack(crashsim.FlushID(id)) }

const (
	netConns   = 3
	netPages   = 8
	netBatches = 12
	netBatch   = 10
)

type netCase struct {
	emulate Mode // ModeMsync or ModeDAX
	hooks   *testHooks
}

// netTrace runs one trace and returns the checker's verdict and what the
// initiators saw complete.
func netTrace(t *testing.T, c netCase, seed uint64) (acked int, err error) {
	t.Helper()
	page := pageSize()
	size := int64(netPages * page)
	var proxy shadowProxy
	opts := []Option{WithShadow(&proxy, c.emulate)}
	if c.hooks != nil {
		opts = append(opts, withHooks(*c.hooks))
	}
	s, err := Open(tpath(memDir(t), fmt.Sprintf("net%d", seed)), size, opts...)
	require.NoError(t, err)
	defer s.Close()
	// Placement runs concurrently with persists: the shadow tracks versions
	// only (a copy of the working image would race with placement).
	sh := crashsim.NewShadow(int(size), page, 64, nil)
	proxy.sh = sh
	chk := crashsim.NewChecker(sh, netConns)
	// A window that does not start at the sink's first byte, so that a
	// persist of the wrong offsets shows.
	x := serve(t, s, ServerConfig{Off: page, obs: netObserver{chk}})

	rng := rand.New(rand.NewPCG(seed, 7))
	cutAt := int64(1 + rng.IntN(netConns*netBatches))
	var batches atomic.Int64
	var cutOnce sync.Once
	var cutErr error
	cut := make(chan struct{})
	doCut := func() {
		cutOnce.Do(func() {
			cutErr = errors.Join(chk.Err(), chk.Cut())
			close(cut)
		})
	}
	var wg sync.WaitGroup
	errs := make([]error, netConns)
	for i := range netConns {
		cl := newNetClient(t, x.addr(), rng.Uint64())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.close()
			for range netBatches {
				select {
				case <-cut:
					return
				default:
				}
				if err := cl.batch(); err != nil {
					errs[i] = err
					return
				}
				if batches.Add(1) == cutAt {
					doCut()
				}
			}
		}()
	}
	wg.Wait()
	doCut()
	require.NoError(t, errors.Join(errs...), "the traffic itself")
	_, _, acks := chk.Counts()
	return acks, cutErr
}

// netClient posts random batches on one connection.
type netClient struct {
	t      *testing.T
	rng    *rand.Rand
	pd     *conn.PD
	cq     *conn.CQ
	qp     *conn.QP
	src    *conn.MR
	back   *conn.MR
	msgs   *conn.MR
	remote Remote
	page   uint64
	gctx   uint64
}

const (
	netSendSlots = 16
	netRecvs     = 16
)

func newNetClient(t *testing.T, addr string, seed uint64) *netClient {
	c := &netClient{t: t, rng: rand.New(rand.NewPCG(seed, 1)), pd: conn.NewPD(), page: pageSize()}
	c.cq = conn.NewCQ(1024)
	var err error
	c.qp, err = c.pd.NewQP(c.cq, conn.QPCaps{SendDepth: 2 * netBatch, RecvDepth: netRecvs})
	require.NoError(t, err)
	c.src, err = c.pd.Register(make([]byte, 2*netPages*c.page), 0)
	require.NoError(t, err)
	c.back, err = c.pd.Register(make([]byte, netPages*c.page), conn.LocalWrite)
	require.NoError(t, err)
	c.msgs, err = c.pd.Register(make([]byte, netSendSlots*32+netRecvs*rpma.MessageSizeMax), conn.LocalWrite)
	require.NoError(t, err)
	for i := range netRecvs {
		require.NoError(t, c.postRecv(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// With CRC (the default): this test writes and reads overlapping bytes
	// freely, on one connection and across them, so Read Responses go out
	// from memory other connections are writing; each must still pass its
	// CRC at the initiator.
	require.NoError(t, c.qp.Connect(ctx, "tcp", addr))
	require.True(t, c.qp.Negotiated().CRC)
	require.True(t, c.qp.PeerFlushes())
	c.remote, err = ParseRemote(c.qp.Negotiated().PeerPrivateData)
	require.NoError(t, err)
	return c
}

func (c *netClient) postRecv(i int) error {
	return c.qp.PostRecv(conn.RecvWR{ID: uint64(i), SGL: []conn.SGE{c.msgs.SGE(netSendSlots*32+i*rpma.MessageSizeMax, rpma.MessageSizeMax)}})
}

func (c *netClient) close() { c.qp.Close() }

// randomRange picks a range of the region, often around page and line
// boundaries and often an aligned 8-byte word.
func (c *netClient) randomRange(maxLen uint64) (uint64, uint64) {
	size := c.remote.Size
	n := 1 + c.rng.Uint64N(min(maxLen, size))
	var off uint64
	switch c.rng.IntN(4) {
	case 0:
		off = c.rng.Uint64N(size)
	case 1:
		off = c.rng.Uint64N(size/c.page+1)*c.page + c.rng.Uint64N(128) - 64
	case 2:
		off = c.rng.Uint64N(size/64+1)*64 + c.rng.Uint64N(8) - 4
	default:
		off, n = c.rng.Uint64N(size/8)*8, 8
	}
	if off >= size {
		off = c.rng.Uint64N(size)
	}
	return off, min(n, size-off)
}

// batch posts up to netBatch random work requests without waiting, then
// waits for all of them and for the GPSPM responses.
func (c *netClient) batch() error {
	var srcUsed uint64
	var wrs []conn.SendWR
	gpspm := 0
	for range 1 + c.rng.IntN(netBatch) {
		var wr conn.SendWR
		switch r := c.rng.IntN(100); {
		case r < 45:
			off, n := c.randomRange(2*c.page + 100)
			if srcUsed+n > uint64(c.src.Len()) {
				continue
			}
			b := c.src.Bytes()[srcUsed : srcUsed+n]
			for i := range b {
				b[i] = byte(c.rng.Uint32())
			}
			wr = conn.SendWR{Op: conn.OpWrite, SGL: []conn.SGE{c.src.SGE(int(srcUsed), int(n))}, Remote: c.remote.Addr(off)}
			srcUsed += n
		case r < 58:
			off, n := c.randomRange(c.remote.Size)
			wr = conn.SendWR{Op: conn.OpFlush, Remote: c.remote.Addr(off), FlushLength: n}
		case r < 63:
			wr = conn.SendWR{Op: conn.OpFlush, Flags: conn.FlushRegion, Remote: c.remote.Addr(0)}
		case r < 76:
			if gpspm == netSendSlots {
				continue
			}
			off, n := c.randomRange(c.remote.Size)
			c.gctx++
			slot := gpspm * 32
			rpma.FlushRequest{Offset: off, Length: n, OpContext: c.gctx}.Append(c.msgs.Bytes()[slot : slot : slot+32])
			wr = conn.SendWR{Op: conn.OpSend, SGL: []conn.SGE{c.msgs.SGE(slot, rpma.FlushRequestLen)}}
			gpspm++
		case r < 90: // librpma's rpma_flush
			off, _ := c.randomRange(8)
			off = min(off, c.remote.Size-8)
			wr = conn.SendWR{Op: conn.OpRead, SGL: []conn.SGE{c.back.SGE(0, 8)}, Remote: c.remote.Addr(off)}
		default:
			off, n := c.randomRange(c.remote.Size)
			wr = conn.SendWR{Op: conn.OpRead, SGL: []conn.SGE{c.back.SGE(0, int(n))}, Remote: c.remote.Addr(off)}
		}
		wr.Flags |= conn.Signaled
		wrs = append(wrs, wr)
	}
	if _, err := c.qp.PostSendBatch(wrs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want, got, resps := len(wrs), 0, 0
	wcs := make([]conn.WorkCompletion, 32)
	for got < want || resps < gpspm {
		n, err := c.cq.Wait(ctx, wcs)
		if err != nil {
			return fmt.Errorf("waiting for %d of %d completions, %d of %d GPSPM responses: %w", want-got, want, gpspm-resps, gpspm, err)
		}
		for _, wc := range wcs[:n] {
			if err := wc.Err(); err != nil {
				return err
			}
			if wc.Op == conn.WCRecv {
				if _, err := rpma.ParseFlushResponse(c.msgs.Bytes()[netSendSlots*32+int(wc.ID)*rpma.MessageSizeMax:][:wc.ByteLen]); err != nil {
					return err
				}
				resps++
				if err := c.postRecv(int(wc.ID)); err != nil {
					return err
				}
				continue
			}
			got++
		}
	}
	return nil
}

func netCount(full int) int {
	if raceOn {
		return max(full/6, 4) // 41 of 250
	}
	return full
}

// 100 % of the bytes covered by an acknowledged flush survive the cut,
// and no acknowledgement precedes its persist, for msync's pages and
// DAX's cache lines.
func TestCrashNet_AcknowledgedFlushesSurvive(t *testing.T) {
	for _, mode := range []Mode{ModeMsync, ModeDAX} {
		t.Run(mode.String(), func(t *testing.T) {
			n := netCount(250)
			acks := 0
			for i := range n {
				a, err := netTrace(t, netCase{emulate: mode}, uint64(i))
				require.NoError(t, err, "trace %d", i)
				acks += a
			}
			require.Greater(t, acks, 5*n, "the traces acknowledge flushes")
		})
	}
}

// Each deliberately broken target fails the simulator driven from the
// network.
func TestCrashNet_DefectsAreCaught(t *testing.T) {
	for name, h := range map[string]testHooks{
		"ack before persist":                  {ackEarly: true},
		"read answered without a persist":     {readNoPersist: true},
		"flush range without the window base": {flushNoBase: true},
		"GPSPM answered without a persist":    {gpspmNoPersist: true},
	} {
		t.Run(name, func(t *testing.T) {
			var caught error
			for i := range 60 {
				if _, err := netTrace(t, netCase{emulate: ModeMsync, hooks: &h}, uint64(1000+i)); err != nil {
					caught = err
					break
				}
			}
			require.Error(t, caught, "the simulator must reject this defect")
			t.Logf("caught: %v", caught)
		})
	}
}
