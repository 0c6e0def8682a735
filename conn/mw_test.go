package conn

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
	"github.com/iwarp-go/iwarp-go/termcode"
	"github.com/stretchr/testify/require"
)

// A type 1 window between two iwarp-go peers: Write and Read through it
// land in and come from exactly its range of the region; an access past
// its end fails at the peer with "base or bounds" and nothing else moves.
func TestMW_Type1_EndToEnd(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	base := pattern(4096, 3)
	mem := append([]byte(nil), base...)
	mr, err := server.pd.Register(mem, LocalWrite|RemoteWrite|RemoteRead|MWBind)
	require.NoError(t, err)
	mw, err := server.pd.AllocMW(MWType1)
	require.NoError(t, err)
	_, err = mw.Bind(BindInfo{MR: mr, Offset: 1000, Length: 500, Access: RemoteWrite | RemoteRead, ZeroBased: true})
	require.NoError(t, err)
	require.Equal(t, 500, mw.Len())
	require.Equal(t, uint64(0), mw.Remote(0).TO)

	src := client.register(t, 100, 0)
	copy(src.Bytes(), bytes.Repeat([]byte{0xC1}, 100))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 1, Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 100)}, Remote: mw.Remote(400)}))
	client.waitOK(t, WCRDMAWrite)
	sink := client.register(t, 100, LocalWrite)
	require.NoError(t, client.qp.PostSend(SendWR{ID: 2, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 100)}, Remote: mw.Remote(400)}))
	client.waitOK(t, WCRDMARead)
	require.Equal(t, src.Bytes(), sink.Bytes(), "the Read through the window returns what the Write put there")

	// One byte past the window's end: the peer ends the connection.
	require.NoError(t, client.qp.PostSend(SendWR{ID: 3, Op: OpRead, Flags: Signaled, SGL: []SGE{sink.SGE(0, 2)}, Remote: mw.Remote(499)}))
	wc := client.wait(t)
	require.Equal(t, WCRemAccessErr, wc.Status)
	var te *rdmap.TerminateError
	require.ErrorAs(t, wc.Err(), &te)
	require.Equal(t, termcode.RDMAPBaseBounds, te.Code)
	<-server.qp.Done()

	want := append([]byte(nil), base...)
	copy(want[1400:1500], src.Bytes())
	require.Equal(t, want, mem)
	require.NoError(t, mw.Free())
	require.NoError(t, mr.Deregister())
}

// A type 2 window bound with OpBindMW on the server's queue pair, written by
// its peer, then invalidated by the peer's Send with Invalidate (RFC 5040
// §5.3): the receive completes with WCWithInv and the window is unbound.
func TestMW_Type2_BindWriteSendWithInvalidate(t *testing.T) {
	checkLeaks(t)
	client, server := connectPair(t, pairConfig{})
	mem := make([]byte, 256)
	mr, err := server.pd.Register(mem, LocalWrite|RemoteWrite|MWBind)
	require.NoError(t, err)
	mw, err := server.pd.AllocMW(MWType2)
	require.NoError(t, err)
	old := mw.STag()
	key := old.Key() + 1
	require.NoError(t, server.qp.PostSend(SendWR{ID: 9, Op: OpBindMW, Flags: Signaled, MW: mw,
		Bind: BindInfo{MR: mr, Offset: 64, Length: 64, Access: RemoteWrite, Key: key}}))
	wc := server.waitOK(t, WCBindMW)
	require.Equal(t, uint64(9), wc.ID)
	require.Equal(t, old&^0xff|STag(key), mw.STag(), "the key chosen at bind (verbs' rkey update)")

	rbuf := server.register(t, 16, LocalWrite)
	require.NoError(t, server.qp.PostRecv(RecvWR{ID: 4, SGL: []SGE{rbuf.SGE(0, 16)}}))
	src := client.register(t, 64, 0)
	copy(src.Bytes(), pattern(64, 9))
	require.NoError(t, client.qp.PostSend(SendWR{Op: OpWrite, SGL: []SGE{src.SGE(0, 64)}, Remote: mw.Remote(0)}))
	require.NoError(t, client.qp.PostSend(SendWR{ID: 5, Op: OpSendInv, Flags: Signaled, InvSTag: mw.STag()}))
	client.waitOK(t, WCSend)
	wc = server.waitOK(t, WCRecv)
	require.Equal(t, WCWithInv, wc.Flags)
	require.Equal(t, uint32(mw.STag()), wc.InvSTag)
	require.False(t, mw.Bound())
	require.Equal(t, pattern(64, 9), mem[64:128])

	// Unbound, the window no longer holds the region.
	require.NoError(t, mr.Deregister())
	require.NoError(t, mw.Free())
}

// The post-time and start-time rules of OpBindMW, and OpLocalInv of a type
// 1 window (verbs: not allowed).
func TestMW_PostRules(t *testing.T) {
	checkLeaks(t)
	_, server := connectPair(t, pairConfig{})
	mr, err := server.pd.Register(make([]byte, 64), LocalWrite|RemoteWrite|MWBind)
	require.NoError(t, err)
	plain := server.register(t, 64, LocalWrite|RemoteWrite)
	t1, err := server.pd.AllocMW(MWType1)
	require.NoError(t, err)
	t2, err := server.pd.AllocMW(MWType2)
	require.NoError(t, err)
	info := BindInfo{MR: mr, Length: 8, Access: RemoteWrite, Key: t2.STag().Key() + 1}
	for name, wr := range map[string]SendWR{
		"no window": {Op: OpBindMW, Bind: info},
		"type 1":    {Op: OpBindMW, MW: t1, Bind: info},
		"no region": {Op: OpBindMW, MW: t2},
		"SGL":       {Op: OpBindMW, MW: t2, Bind: info, SGL: []SGE{mr.SGE(0, 1)}},
	} {
		require.ErrorIs(t, server.qp.PostSend(wr), ErrInvalidWR, name)
	}
	_, err = t2.Bind(info)
	require.ErrorIs(t, err, ErrInvalidWR, "type 2 windows bind on the send queue")

	// Refused at start, in order: WCMWBindErr, nothing bound.
	for _, bad := range []BindInfo{
		{MR: plain, Length: 8, Access: RemoteWrite, Key: info.Key},          // no MWBind
		{MR: mr, Length: 8, Access: RemoteRead, Key: info.Key},              // more than the region
		{MR: mr, Offset: 60, Length: 8, Access: RemoteWrite, Key: info.Key}, // outside
	} {
		require.NoError(t, server.qp.PostSend(SendWR{ID: 1, Op: OpBindMW, MW: t2, Bind: bad}))
		wc := server.wait(t)
		require.Equal(t, WCMWBindErr, wc.Status, "%+v", bad)
		require.Equal(t, WCBindMW, wc.Op)
		require.False(t, t2.Bound())
	}
	_, err = t1.Bind(BindInfo{MR: mr, Length: 8, Access: RemoteWrite})
	require.NoError(t, err)
	require.NoError(t, server.qp.PostSend(SendWR{ID: 2, Op: OpLocalInv, InvSTag: t1.STag()}))
	wc := server.wait(t)
	require.Equal(t, WCLocProtErr, wc.Status)
	require.True(t, t1.Bound())
	require.NoError(t, server.qp.PostSend(SendWR{ID: 3, Op: OpLocalInv, InvSTag: mr.STag()}))
	wc = server.wait(t)
	require.Equal(t, WCLocProtErr, wc.Status, "a region with windows bound is not invalidated")
	st, err := t1.Bind(BindInfo{})
	require.NoError(t, err, "a zero-length bind unbinds a type 1 window")
	require.Zero(t, st)
	require.False(t, t1.Bound())
	require.NoError(t, mr.Invalidate())
}

// Invalidation races RDMA Writes through the window: whatever the timing,
// once MW.Invalidate has returned no byte of the region changes again, the
// Writes never touched a byte outside the window, and the writer's
// connection ends with "invalid STag".
func TestMW_InvalidateRacesWrites(t *testing.T) {
	checkLeaks(t)
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond} {
		client, server := connectPair(t, pairConfig{})
		base := pattern(1<<16, 1)
		mem := append([]byte(nil), base...)
		mr, err := server.pd.Register(mem, LocalWrite|RemoteWrite|MWBind)
		require.NoError(t, err)
		mw, err := server.pd.AllocMW(MWType1)
		require.NoError(t, err)
		const off, n = 4096, 32768
		_, err = mw.Bind(BindInfo{MR: mr, Offset: off, Length: n, Access: RemoteWrite})
		require.NoError(t, err)
		src := client.register(t, 4096, 0)
		copy(src.Bytes(), bytes.Repeat([]byte{0xEE}, 4096))

		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				err := client.qp.PostSend(SendWR{Op: OpWrite, SGL: []SGE{src.SGE(0, 4096)}, Remote: mw.Remote((i * 4096) % n)})
				if errors.Is(err, ErrSQFull) {
					var wcs [16]WorkCompletion
					client.cq.Poll(wcs[:])
					time.Sleep(10 * time.Microsecond)
					continue
				}
				if err != nil {
					return
				}
			}
		}()
		time.Sleep(delay)
		require.NoError(t, mw.Invalidate())
		snapshot := append([]byte(nil), mem...)
		<-server.qp.Done()
		<-server.qp.finished
		<-done
		require.Equal(t, snapshot, mem, "bytes changed after Invalidate returned (delay %v)", delay)
		require.Equal(t, base[:off], mem[:off])
		require.Equal(t, base[off+n:], mem[off+n:])
		var te *rdmap.TerminateError
		require.ErrorAs(t, server.qp.Err(), &te)
		require.Equal(t, termcode.DDPTaggedInvalidSTag, te.Code, "%+v delay %v", te, delay)
		client.qp.Close()
		server.qp.Close()
	}
}

// Writes through a window cost what Writes to a region cost: no heap
// allocation per operation.
func BenchmarkWriteThroughWindow(b *testing.B) {
	for _, size := range []int{64, 4096} {
		b.Run(sizeName(size), func(b *testing.B) {
			client, server := benchPair(b)
			target := server.register(b, size, LocalWrite|RemoteWrite|MWBind)
			mw, err := server.pd.AllocMW(MWType1)
			require.NoError(b, err)
			_, err = mw.Bind(BindInfo{MR: target, Length: size, Access: RemoteWrite})
			require.NoError(b, err)
			src := client.register(b, size, 0)
			sgl := []SGE{src.SGE(0, size)}
			remote := mw.Remote(0)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			drive(b, client, func(int) SendWR {
				return SendWR{Op: OpWrite, SGL: sgl, Remote: remote}
			})
		})
	}
}

// A type 2 window used from another queue pair is "not associated with this
// stream" (RFC 5040 §8.1.1 item 2), exactly as a region of another PD; its
// remote invalidation from another queue pair is refused as a protection
// error (RFC 5040 §5.3: 0/1/0x09).
func TestFailureConditions_QPMismatch_RFC5040_8_1_1(t *testing.T) {
	for _, u := range []remoteUse{useWriteSink, useReadSource, useAtomicTarget} {
		require.Equal(t, conditionFor(u, stag.PDMismatch), conditionFor(u, stag.QPMismatch), "use %d", u)
	}
	require.Equal(t, termcode.DDPTaggedSTagNotAssociated, conditionFor(useWriteSink, stag.QPMismatch).Code())
	require.Equal(t, termcode.RDMAPSTagNotAssociated, conditionFor(useReadSource, stag.QPMismatch).Code())
	require.Equal(t, termcode.RDMAPProtCannotInvalidate, conditionFor(useInvalidate, stag.QPMismatch).Code())
	require.Equal(t, rdmap.RDMAPLocalCatastrophic, conditionFor(useWriteSink, stag.BoundWindows), "never a lookup result")
}

// Two connections of one server PD: a type 2 window bound on the first is
// reachable by the first's peer only; the second's peer gets "STag not
// associated" (RFC 5040 §8.1.1 item 2) and its connection ends, while the
// first goes on.
func TestMW_Type2_TiedToItsQP_RFC5040_8_1_1(t *testing.T) {
	checkLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pd := NewPD()
	scq := NewCQ(64)
	ln, err := Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var sqp [2]*QP
	var cli [2]*endpoint
	for i := range sqp {
		sqp[i], cli[i] = connectOnPD(t, ctx, ln, pd, scq, nil)
	}
	mem := make([]byte, 128)
	mr, err := pd.Register(mem, LocalWrite|RemoteWrite|MWBind)
	require.NoError(t, err)
	mw, err := pd.AllocMW(MWType2)
	require.NoError(t, err)
	require.NoError(t, sqp[0].PostSend(SendWR{Op: OpBindMW, Flags: Signaled, MW: mw,
		Bind: BindInfo{MR: mr, Length: 64, Access: RemoteWrite, Key: mw.STag().Key() + 1}}))
	var wcs [1]WorkCompletion
	_, err = scq.Wait(ctx, wcs[:])
	require.NoError(t, err)
	require.Equal(t, WCBindMW, wcs[0].Op)
	require.NoError(t, wcs[0].Err())
	src := cli[0].register(t, 8, 0)
	copy(src.Bytes(), "by qp 0!")
	require.NoError(t, cli[0].qp.PostSend(SendWR{Op: OpWrite, Flags: Signaled, SGL: []SGE{src.SGE(0, 8)}, Remote: mw.Remote(0)}))
	cli[0].waitOK(t, WCRDMAWrite)

	other := cli[1].register(t, 8, 0)
	copy(other.Bytes(), "by qp 1!")
	require.NoError(t, cli[1].qp.PostSend(SendWR{Op: OpWrite, Flags: Signaled, SGL: []SGE{other.SGE(0, 8)}, Remote: mw.Remote(8)}))
	<-sqp[1].Done()
	var te *rdmap.TerminateError
	require.ErrorAs(t, sqp[1].Err(), &te)
	require.Equal(t, termcode.DDPTaggedSTagNotAssociated, te.Code)
	<-sqp[1].finished

	// The first connection is unaffected, and its Write is ordered before
	// its later Send.
	rbuf, err := pd.Register(make([]byte, 8), LocalWrite)
	require.NoError(t, err)
	require.NoError(t, sqp[0].PostRecv(RecvWR{ID: 1, SGL: []SGE{rbuf.SGE(0, 8)}}))
	require.NoError(t, cli[0].qp.PostSend(SendWR{Op: OpSend, SGL: []SGE{src.SGE(0, 8)}}))
	_, err = scq.Wait(ctx, wcs[:])
	require.NoError(t, err)
	require.Equal(t, WCRecv, wcs[0].Op)
	require.Equal(t, "by qp 0!", string(mem[:8]))
	require.Equal(t, make([]byte, 120), mem[8:])
}
