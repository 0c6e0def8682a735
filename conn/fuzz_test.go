package conn

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/iwarp-go/iwarp-go/mpa"
	"github.com/iwarp-go/iwarp-go/rdmap"
	"github.com/iwarp-go/iwarp-go/stag"
)

// seededDevice returns a device whose STags are a function of the seed, so
// that fuzz inputs can name live regions.
func seededDevice(tb testing.TB) *Device {
	t, err := stag.NewTable(stag.WithSeed([32]byte{1, 2, 3}))
	if err != nil {
		tb.Fatal(err)
	}
	return &Device{table: t}
}

// fuzzTarget is a responder QP over net.Pipe with regions between guard
// zones: rw (remote write/read), ro (remote read only), recv (receives),
// and one of another PD.
type fuzzTarget struct {
	arena []byte
	want  []byte
	rw    *MR
	ro    *MR
	recv  *MR
	other *MR
}

const fuzzRegion = 256

func newFuzzTarget(tb testing.TB) (*fuzzTarget, *PD) {
	dev := seededDevice(tb)
	pd := dev.NewPD()
	ft := &fuzzTarget{arena: pattern(guardLen+4*(fuzzRegion+guardLen), 0x3C)}
	region := func(i int) []byte {
		off := guardLen + i*(fuzzRegion+guardLen)
		return ft.arena[off : off+fuzzRegion : off+fuzzRegion]
	}
	var err error
	reg := func(pd *PD, b []byte, a Access) *MR {
		mr, e := pd.Register(b, a, ZeroBased())
		if e != nil {
			err = e
		}
		return mr
	}
	ft.rw = reg(pd, region(0), LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic)
	ft.ro = reg(pd, region(1), RemoteRead)
	ft.recv = reg(pd, region(2), LocalWrite)
	ft.other = reg(dev.NewPD(), region(3), LocalWrite|RemoteWrite)
	if err != nil {
		tb.Fatal(err)
	}
	ft.want = append([]byte(nil), ft.arena...)
	return ft, pd
}

// frameULPDUs turns data into FPDUs (CRC off): each chunk is a length byte
// n followed by n bytes of ULPDU, so the fuzzer can build valid headers.
func frameULPDUs(data []byte) []byte {
	var out []byte
	for len(data) > 0 {
		n := min(int(data[0]), len(data)-1)
		u := data[1 : 1+n]
		data = data[1+n:]
		out = binary.BigEndian.AppendUint16(out, uint16(len(u)))
		out = append(out, u...)
		for len(out)%4 != 0 {
			out = append(out, 0)
		}
		out = append(out, 0, 0, 0, 0)
	}
	return out
}

func fuzzSeed(ulpdus ...[]byte) []byte { return fuzzSeedMode(1, ulpdus...) }

// fuzzSeedMode is fuzzSeed with the mode byte: bit 0 framed, bits 1–2 the
// peer-to-peer RTR type (0 none, 1 Write, 2 Read, 3 Send), bit 3 an
// iwarp-go peer (its trailer: the Flush extension on), bit 4 receives from
// a shared receive queue.
func fuzzSeedMode(mode byte, ulpdus ...[]byte) []byte {
	b := []byte{mode}
	for _, u := range ulpdus {
		b = append(b, byte(len(u)))
		b = append(b, u...)
	}
	return b
}

// FuzzReceivePath feeds arbitrary bytes, after a valid MPA exchange, into a
// live queue pair. Whatever arrives: no panic, the queue pair ends or keeps
// going without leaking goroutines, no byte outside the regions the peer may
// write changes, and the memory allocated does not grow with what the peer
// sends.
func FuzzReceivePath(f *testing.F) {
	ft, _ := newFuzzTarget(f)
	rw, ro, other := uint32(ft.rw.STag()), uint32(ft.ro.STag()), uint32(ft.other.STag())
	payload := []byte("fuzz payload bytes")
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, rw, 0, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, false, rw, 0, payload), uTagged(rdmap.OpWrite, true, rw, 18, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, ro, 0, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, other, 0, payload)))
	f.Add(fuzzSeed(uTagged(rdmap.OpWrite, true, rw, fuzzRegion-4, payload)))
	f.Add(fuzzSeed(uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload), uSend(rdmap.OpSend, true, 0, 0, 2, 0, payload)))
	f.Add(fuzzSeed(uSend(rdmap.OpSendInvalidate, true, rw, 0, 1, 0, payload)))
	f.Add(fuzzSeed(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 7, Size: 16, SrcSTag: rw, SrcTO: 0})))
	f.Add(fuzzSeed(uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 7, Size: 16, SrcSTag: ro, SrcTO: 0}), uReadReq(2, 0, rdmap.ReadRequestFields{SinkSTag: 7, Size: 1 << 30, SrcSTag: rw})))
	f.Add(fuzzSeed(uTagged(rdmap.OpReadResponse, true, rw, 0, payload)))
	f.Add(fuzzSeed(append([]byte{0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}, 0x11, 0, 3, 0)))
	f.Add([]byte{0, 0xff, 0xff, 0x41, 0x43})
	f.Add([]byte{0, 0x00, 0x04, 0xc1, 0x40, 0, 0})
	// Every RTR type, right and wrong (a Send RTR without L was once a
	// crash of the process), and the Flush extension.
	rtrSend := uSend(rdmap.OpSend, true, 0, 0, 1, 0, nil)
	f.Add(fuzzSeedMode(1|1<<1, uTagged(rdmap.OpWrite, true, 1, 0, nil), uTagged(rdmap.OpWrite, true, rw, 0, payload)))
	f.Add(fuzzSeedMode(1|2<<1, uReadReq(1, 0, rdmap.ReadRequestFields{SinkSTag: 1, SrcSTag: 1})))
	f.Add(fuzzSeedMode(1|3<<1, rtrSend, uSend(rdmap.OpSend, true, 0, 0, 2, 0, payload)))
	f.Add(fuzzSeedMode(1|3<<1, uSend(rdmap.OpSend, false, 0, 0, 1, 0, nil), uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload)))
	f.Add(fuzzSeedMode(1|1<<1|1<<3, uTagged(rdmap.OpWrite, true, rw, 0, payload),
		rdmap.AppendFlushRequest(nil, 1, rdmap.FlushRequestFields{ID: 1, STag: rw, Length: 16, Placement: rdmap.PlaceVisibility | rdmap.PlacePersistence})))
	f.Add(fuzzSeedMode(1|1<<3, rdmap.AppendFlushResponse(nil, 1, rdmap.FlushResponseFields{ID: 1})))
	// RFC 7306, negotiated through the same trailer.
	f.Add(fuzzSeedMode(1|1<<3, rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{Op: rdmap.AtomicFetchAdd, ID: 1, STag: rw, TO: 8, Args: rdmap.AtomicArgs{AddSwap: 3}}),
		rdmap.AppendAtomicRequest(nil, 2, rdmap.AtomicRequestFields{Op: rdmap.AtomicCmpSwap, ID: 2, STag: rw, TO: 8, Args: CmpSwap(3, 9)})))
	f.Add(fuzzSeedMode(1|1<<3, rdmap.AppendImmediate(nil, rdmap.OpImmediate, 1, 5), rdmap.AppendImmediate(nil, rdmap.OpImmediateSE, 2, 6)))
	f.Add(fuzzSeedMode(1|1<<3, rdmap.AppendAtomicResponse(nil, 1, 1, 1)))
	f.Add(fuzzSeedMode(1, rdmap.AppendAtomicRequest(nil, 1, rdmap.AtomicRequestFields{STag: rw})))
	// Receives from a shared receive queue: whole, half and too many Sends.
	f.Add(fuzzSeedMode(1|1<<4, uSend(rdmap.OpSend, true, 0, 0, 1, 0, payload), uSend(rdmap.OpSend, true, 0, 0, 2, 0, payload)))
	f.Add(fuzzSeedMode(1|1<<4, uSend(rdmap.OpSend, false, 0, 0, 1, 0, payload)))
	f.Add(fuzzSeedMode(1|1<<4, uSend(rdmap.OpSend, true, 0, 0, 1, 0, nil), uSend(rdmap.OpSend, true, 0, 0, 2, 0, nil), uSend(rdmap.OpSend, true, 0, 0, 3, 0, nil)))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		allocBefore := ms.TotalAlloc

		ft, pd := newFuzzTarget(t)
		cq := NewCQ(16)
		caps := QPCaps{RecvDepth: 2, SendDepth: 2}
		var srq *SRQ
		if data[0]&(1<<4) != 0 {
			var err error
			if srq, err = pd.NewSRQ(SRQCaps{Depth: 2, MaxSGE: 1}); err != nil {
				t.Fatal(err)
			}
			caps.SRQ = srq
		}
		qp, err := pd.NewQP(cq, caps)
		if err != nil {
			t.Fatal(err)
		}
		post := qp.PostRecv
		if srq != nil {
			post = srq.PostRecv
		}
		post(RecvWR{SGL: []SGE{ft.recv.SGE(0, 100)}})
		post(RecvWR{SGL: []SGE{ft.recv.SGE(100, 156)}})

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, b := net.Pipe()
		defer a.Close()
		mode := data[0]
		peerCfg := mpa.Config{Revision: 2, CRC: mpa.CRCOff, IRD: 1, ORD: 1}
		serverOpts := []Option{WithCRC(CRCOff), WithIRDORD(1, 1)}
		if rtr := [...]mpa.RTR{0, mpa.RTRWrite, mpa.RTRRead, mpa.RTRSend}[mode>>1&3]; rtr != 0 {
			peerCfg.P2P, peerCfg.RTR = true, rtr
			serverOpts = append(serverOpts, WithP2P(RTR(rtr)))
		}
		var trailer []byte
		if mode&(1<<3) != 0 {
			trailer = appendPeerTrailer(nil)
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			if _, err := mpa.Connect(ctx, a, &peerCfg, trailer); err != nil {
				return
			}
			go func() { // the raw peer writes while it reads what comes back
				if data[0]&1 == 1 {
					a.Write(frameULPDUs(data[1:]))
				} else {
					a.Write(data[1:])
				}
				a.Close()
			}()
			io.Copy(io.Discard, a)
		}()
		cr, err := Server(ctx, b, serverOpts...)
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
		if srq != nil {
			// Every receive either stayed on the SRQ or completed once,
			// and the ended queue pair no longer holds the SRQ.
			var wcs [16]WorkCompletion
			recvs := 0
			for _, wc := range wcs[:cq.Poll(wcs[:])] {
				if wc.Op == WCRecv {
					recvs++
				}
			}
			if n := srq.Len(); n+recvs != 2 {
				t.Fatalf("%d receives on the SRQ and %d completed, of 2", n, recvs)
			}
			if err := srq.Close(); err != nil {
				t.Fatal(err)
			}
		}

		// The peer may write rw (Write) and recv (Send); nothing else.
		for i := range ft.arena {
			if ft.arena[i] != ft.want[i] && !writable(i) {
				t.Fatalf("byte %d outside the writable regions changed", i)
			}
		}
		runtime.ReadMemStats(&ms)
		if grew := ms.TotalAlloc - allocBefore; grew > 4<<20 {
			t.Fatalf("one connection allocated %d bytes", grew)
		}
	})
}

// writable reports whether arena index i lies in rw (region 0) or recv
// (region 2), the regions a peer may change.
func writable(i int) bool {
	for _, k := range []int{0, 2} {
		start := guardLen + k*(fuzzRegion+guardLen)
		if i >= start && i < start+fuzzRegion {
			return true
		}
	}
	return false
}
