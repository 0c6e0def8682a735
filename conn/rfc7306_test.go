package conn

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/stretchr/testify/require"
)

// FetchAdd and CmpSwap between iwarp-go peers (RFC 7306 §5.2): the
// requester receives the word's previous value in its 8-byte SGE, the
// target word holds the result.
func TestAtomic_FetchAddCmpSwap_RFC7306_5_2(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	require.True(t, client.qp.PeerAtomics())
	require.True(t, server.qp.PeerAtomics())
	target := server.register(t, 64, LocalWrite|RemoteAtomic)
	res := client.register(t, 64, LocalWrite)
	post := func(id uint64, op Op, off int, a AtomicArgs) uint64 {
		t.Helper()
		require.NoError(t, client.qp.PostSend(SendWR{ID: id, Op: op, Flags: Signaled, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(off), Atomic: a}))
		wc := client.waitOK(t, sendOps[op].wc)
		require.Equal(t, id, wc.ID)
		require.Equal(t, uint32(8), wc.ByteLen)
		return res.LoadUint64(0)
	}
	require.Equal(t, uint64(0), post(1, OpFetchAdd, 8, FetchAdd(5)))
	require.Equal(t, uint64(5), post(2, OpFetchAdd, 8, FetchAdd(^uint64(0)))) // -1
	require.Equal(t, uint64(4), target.LoadUint64(8))
	require.Equal(t, uint64(4), post(3, OpCmpSwap, 8, CmpSwap(3, 100)), "no swap: 4 ≠ 3")
	require.Equal(t, uint64(4), target.LoadUint64(8))
	require.Equal(t, uint64(4), post(4, OpCmpSwap, 8, CmpSwap(4, 100)))
	require.Equal(t, uint64(100), target.LoadUint64(8))
	// Masked: two 32-bit counters in one word.
	require.Equal(t, uint64(0), post(5, OpFetchAdd, 16, AtomicArgs{AddSwap: 1<<32 | 0xffffffff, AddSwapMask: 1<<63 | 1<<31}))
	require.Equal(t, uint64(1)<<32|0xffffffff, post(6, OpFetchAdd, 16, AtomicArgs{AddSwap: 1<<32 | 1, AddSwapMask: 1<<63 | 1<<31}))
	require.Equal(t, uint64(2)<<32, target.LoadUint64(16), "the low counter wrapped alone")
	st := server.qp.Stats()
	require.Equal(t, uint64(6), st.FPDUsReceived[rdmap.OpAtomicRequest])
	require.Equal(t, uint64(6), st.FPDUsSent[rdmap.OpAtomicResponse])
}

// Atomics from many goroutines over many queue pairs on one word of one
// region, against a model: every FetchAdd of 1 returns a distinct previous
// value (0 to n-1, each once), and the word ends at n. Run it under -race.
func TestAtomic_ManyQueuePairs_Model(t *testing.T) {
	checkLeaks(t)
	const qps, workers, each = 4, 3, 40
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spd := NewPD()
	target, err := spd.Register(make([]byte, 64), LocalWrite|RemoteAtomic)
	require.NoError(t, err)
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0", WithIRDORD(8, 8))
	require.NoError(t, err)
	defer ln.Close()
	var clients []*endpoint
	for i := 0; i < qps; i++ {
		sqp, err := spd.NewQP(NewCQ(64), QPCaps{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(ctx, sqp) }()
		c := newEndpoint(t, QPCaps{SendDepth: 64})
		require.NoError(t, c.qp.Connect(ctx, "tcp", ln.Addr().String(), WithIRDORD(8, 8)))
		require.NoError(t, <-errc)
		t.Cleanup(func() { c.qp.Close(); sqp.Close() })
		clients = append(clients, c)
	}
	var mu sync.Mutex
	var seen []uint64
	var wg sync.WaitGroup
	for _, c := range clients {
		// A slot for each operation's previous value; one collector per
		// CQ reads them as the completions come, whichever worker posted.
		res := c.register(t, 8*workers*each, LocalWrite)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < each; k++ {
					slot := w*each + k
					wr := SendWR{ID: uint64(slot), Op: OpFetchAdd, Flags: Signaled, SGL: []SGE{res.SGE(8*slot, 8)}, Remote: target.Remote(0), Atomic: FetchAdd(1)}
					for {
						err := c.qp.PostSend(wr)
						if err == nil {
							break
						}
						if !errors.Is(err, ErrSQFull) && !errors.Is(err, ErrCQFull) {
							t.Error(err)
							return
						}
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var wcs [16]WorkCompletion
			for got := 0; got < workers*each; {
				n, err := c.cq.Wait(ctx, wcs[:])
				if err != nil {
					t.Error(err)
					return
				}
				for _, wc := range wcs[:n] {
					if wc.Status != WCSuccess {
						t.Error(wc.Err())
						return
					}
					mu.Lock()
					seen = append(seen, res.LoadUint64(8*int(wc.ID)))
					mu.Unlock()
				}
				got += n
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	total := qps * workers * each
	require.Equal(t, uint64(total), target.LoadUint64(0))
	require.Len(t, seen, total)
	sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
	for i, v := range seen {
		require.Equal(t, uint64(i), v, "previous values are 0..%d, each once", total-1)
	}
}

// Immediate data (RFC 7306 §4.1): OpWriteImm places the Write, then
// consumes a receive that completes with the value; OpSendImm only the
// latter, with the solicited flag when asked.
func TestImmediate_WriteImmSendImm_RFC7306_4(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	dst := server.register(t, 256, LocalWrite|RemoteWrite)
	rbuf := server.register(t, 64, LocalWrite)
	require.NoError(t, server.qp.PostRecv(RecvWR{ID: 10, SGL: []SGE{rbuf.SGE(0, 64)}}))
	require.NoError(t, server.qp.PostRecv(RecvWR{ID: 11, SGL: []SGE{rbuf.SGE(0, 64)}}))
	src, err := client.pd.Register(pattern(200, 3), 0)
	require.NoError(t, err)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWriteImm, Flags: Signaled, SGL: []SGE{src.SGE(0, 200)}, Remote: dst.Remote(16), Imm: 0x1122334455667788}))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpSendImm, Flags: Signaled | Solicited, Imm: 42}))
	require.Equal(t, uint64(1), client.waitOK(t, WCRDMAWrite).ID)
	require.Equal(t, uint64(2), client.waitOK(t, WCSend).ID)
	wc := server.waitOK(t, WCRecv)
	require.Equal(t, uint64(10), wc.ID)
	require.Equal(t, WCWithImm, wc.Flags)
	require.Equal(t, uint64(0x1122334455667788), wc.Imm)
	require.Zero(t, wc.ByteLen)
	got := make([]byte, 200)
	_, err = dst.ReadAt(got, 16)
	require.NoError(t, err)
	require.Equal(t, pattern(200, 3), got, "the Write is visible once the immediate's receive completed")
	wc = server.waitOK(t, WCRecv)
	require.Equal(t, uint64(11), wc.ID)
	require.Equal(t, WCWithImm|WCSolicited, wc.Flags)
	require.Equal(t, uint64(42), wc.Imm)
}

// Toward a peer that did not negotiate RFC 7306, posting fails at once
// with a clear error and nothing goes on the wire; malformed atomics fail
// at post time too.
func TestRFC7306_PostChecks(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{clientOpts: []Option{WithoutPeerTrailer()}})
	require.False(t, client.qp.PeerAtomics())
	res := client.register(t, 16, LocalWrite)
	target := server.register(t, 64, LocalWrite|RemoteAtomic)
	for _, wr := range []SendWR{
		{Op: OpFetchAdd, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(0)},
		{Op: OpCmpSwap, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(0)},
		{Op: OpWriteImm, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(0)},
		{Op: OpSendImm},
	} {
		err := client.qp.PostSend(wr)
		require.ErrorIs(t, err, ErrRFC7306Unsupported, "%v", wr.Op)
	}
	require.Zero(t, server.qp.Stats().FPDUsReceived[rdmap.OpAtomicRequest])

	c2, s2 := connectPair(t, pairConfig{})
	res2 := c2.register(t, 16, LocalWrite)
	t2 := s2.register(t, 64, LocalWrite|RemoteAtomic)
	for _, wr := range []SendWR{
		{Op: OpFetchAdd, SGL: []SGE{res2.SGE(0, 4)}, Remote: t2.Remote(0)},
		{Op: OpFetchAdd, SGL: []SGE{res2.SGE(0, 8), res2.SGE(8, 8)}, Remote: t2.Remote(0)},
		{Op: OpCmpSwap, SGL: []SGE{res2.SGE(0, 8)}, Remote: t2.Remote(4)},
		{Op: OpSendImm, SGL: []SGE{res2.SGE(0, 8)}},
	} {
		require.ErrorIs(t, c2.qp.PostSend(wr), ErrInvalidWR, "%v", wr.Op)
	}
}

// An atomic the target refuses (no remote-atomic right) completes with
// the Terminate's error at the requester, like a Read's.
func TestAtomic_RemoteAccessError(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	target := server.register(t, 64, LocalWrite|RemoteWrite)
	res := client.register(t, 8, LocalWrite)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpFetchAdd, Flags: Signaled, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(0), Atomic: FetchAdd(1)}))
	wc := client.wait(t)
	require.Equal(t, WCRemAccessErr, wc.Status)
	var te *rdmap.TerminateError
	require.True(t, errors.As(wc.Err(), &te))
	require.Equal(t, rdmap.AtomicTargetAccessRights.Code(), te.Code)
	require.Zero(t, target.LoadUint64(0))
}

// CmpSwap as a lock-free increment from goroutines on queue pairs of
// their own toward one word (RFC 7306 §5.3): each success returns the
// value it replaced, so the successes are 0..n-1, each once, and the word
// ends at n.
func TestAtomic_CmpSwapIncrements_Model(t *testing.T) {
	checkLeaks(t)
	const qps, each = 6, 25
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spd := NewPD()
	target, err := spd.Register(make([]byte, 64), LocalWrite|RemoteAtomic)
	require.NoError(t, err)
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var mu sync.Mutex
	var won []uint64
	var wg sync.WaitGroup
	for i := 0; i < qps; i++ {
		sqp, err := spd.NewQP(NewCQ(16), QPCaps{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- ln.Accept(ctx, sqp) }()
		c := newEndpoint(t, QPCaps{})
		require.NoError(t, c.qp.Connect(ctx, "tcp", ln.Addr().String()))
		require.NoError(t, <-errc)
		t.Cleanup(func() { c.qp.Close(); sqp.Close() })
		res := c.register(t, 8, LocalWrite)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var guess uint64
			var wcs [1]WorkCompletion
			for done := 0; done < each; {
				err := c.qp.PostSend(SendWR{Op: OpCmpSwap, Flags: Signaled, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(8), Atomic: CmpSwap(guess, guess+1)})
				if err == nil {
					_, err = c.cq.Wait(ctx, wcs[:])
				}
				if err == nil {
					err = wcs[0].Err()
				}
				if err != nil {
					t.Error(err)
					return
				}
				old := res.LoadUint64(0)
				if old == guess {
					mu.Lock()
					won = append(won, old)
					mu.Unlock()
					done++
					guess++
				} else {
					guess = old
				}
			}
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	n := qps * each
	require.Equal(t, uint64(n), target.LoadUint64(8))
	sort.Slice(won, func(i, j int) bool { return won[i] < won[j] })
	require.Len(t, won, n)
	for i, v := range won {
		require.Equal(t, uint64(i), v)
	}
}
