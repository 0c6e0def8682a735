package conn

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
)

// FuzzReceivePath_MemoryWindows is FuzzReceivePath with two windows over
// rw: a type 1 window (remote write and read, zero-based, bytes 64..191)
// and a type 2 window tied to another queue pair (bytes 0..63). Whatever
// arrives: no panic or hang, no byte outside rw and recv changes, and
// neither window is unbound, since this peer may invalidate neither (RFC
// 5040 §8.1.1 item 7: a type 1 window serves every stream of the PD, the
// type 2 window belongs to another stream).
func FuzzReceivePath_MemoryWindows(f *testing.F) {
	ft, pd := newFuzzTarget(f)
	w1, w2 := fuzzWindows(f, ft, pd)
	s1, s2 := uint32(w1.STag()), uint32(w2.STag())
	payload := []byte("fuzz payload bytes")
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, s1, 0, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, s1, 120, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, s2, 0, payload)))
	f.Add(fuzzSeed(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 7, Size: 16, SrcSTag: s1, SrcTO: 8})))
	f.Add(fuzzSeed(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 7, Size: 16, SrcSTag: s2})))
	f.Add(fuzzSeed(uSend(rdmap.OpSendInvalidate, true, s1, 0, 1, 0, payload)))
	f.Add(fuzzSeed(uSend(rdmap.OpSendSEInvalidate, true, s2, 0, 1, 0, payload)))
	f.Add(fuzzSeedMode(1|1<<3, rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: s1, TO: 8, Args: rdmap.AtomicArgs{AddSwap: 3}})))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		ft, pd := newFuzzTarget(t)
		w1, w2 := fuzzWindows(t, ft, pd)
		cq := NewCQ(16)
		qp, err := pd.NewQP(cq, QPCaps{RecvDepth: 2, SendDepth: 2})
		if err != nil {
			t.Fatal(err)
		}
		qp.PostRecv(RecvWR{SGL: []SGE{ft.recv.SGE(0, 100)}})
		qp.PostRecv(RecvWR{SGL: []SGE{ft.recv.SGE(100, 156)}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, b := net.Pipe()
		defer a.Close()
		peerCfg := mpa.Config{Revision: 2, CRC: mpa.CRCOff, IRD: 1, ORD: 1}
		var trailer []byte
		if data[0]&(1<<3) != 0 {
			trailer = appendPeerTrailer(nil)
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			if _, err := mpa.Connect(ctx, a, &peerCfg, trailer); err != nil {
				return
			}
			go func() {
				if data[0]&1 == 1 {
					a.Write(frameULPDUs(data[1:]))
				} else {
					a.Write(data[1:])
				}
				a.Close()
			}()
			io.Copy(io.Discard, a)
		}()
		cr, err := Server(ctx, b, WithCRC(CRCOff), WithIRDORD(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := cr.Accept(ctx, qp); err != nil {
			t.Fatal(err)
		}
		select {
		case <-qp.finished:
		case <-time.After(10 * time.Second):
			t.Fatal("queue pair did not end after the peer closed")
		}
		a.Close()
		<-drained
		for i := range ft.arena {
			if ft.arena[i] != ft.want[i] && !writable(i) {
				t.Fatalf("byte %d outside the writable regions changed", i)
			}
		}
		if !w1.Bound() || !w2.Bound() {
			t.Fatalf("a window this peer may not invalidate was unbound (type 1 %v, type 2 %v)", w1.Bound(), w2.Bound())
		}
	})
}

// fuzzWindows binds the two windows of FuzzReceivePath_MemoryWindows over
// rw's bytes, through a second registration of them with MWBind.
func fuzzWindows(tb testing.TB, ft *fuzzTarget, pd *PD) (w1, w2 *MW) {
	tb.Helper()
	mr, err := pd.Register(ft.rw.Bytes(), LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic|MWBind, ZeroBased())
	if err != nil {
		tb.Fatal(err)
	}
	if w1, err = pd.AllocMW(MWType1); err == nil {
		_, err = w1.Bind(BindInfo{MR: mr, Offset: 64, Length: 128, Access: RemoteWrite | RemoteRead | RemoteAtomic, ZeroBased: true})
	}
	if err != nil {
		tb.Fatal(err)
	}
	if w2, err = pd.AllocMW(MWType2); err != nil {
		tb.Fatal(err)
	}
	other, err := pd.NewQP(NewCQ(4), QPCaps{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { other.Close() })
	spec, err := w2.spec(BindInfo{MR: mr, Length: 64, Access: RemoteWrite | RemoteRead, ZeroBased: true, Key: w2.STag().Key() + 1}, other)
	if err == nil {
		_, _, err = w2.w.Bind(spec)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return w1, w2
}
