package conn

import (
	"context"
	"testing"
)

// BenchmarkAtomicLatency is the round trip of one RFC 7306 atomic beside
// an 8-byte RDMA Read (the same request queue, one request in flight):
// post, then wait for its completion. Nothing here asserts a speed.
func BenchmarkAtomicLatency(b *testing.B) {
	for _, tc := range []struct {
		name string
		op   Op
		args AtomicArgs
	}{
		{"read-8B", OpRead, AtomicArgs{}},
		{"fetch-add", OpFetchAdd, FetchAdd(1)},
		{"cmp-swap", OpCmpSwap, CmpSwap(0, 0)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client, server := benchPair(b)
			target := server.register(b, 64, LocalWrite|RemoteRead|RemoteAtomic)
			res := client.register(b, 8, LocalWrite)
			wr := SendWR{Op: tc.op, Flags: Signaled, SGL: []SGE{res.SGE(0, 8)}, Remote: target.Remote(8), Atomic: tc.args}
			var wcs [1]WorkCompletion
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			c := startCost()
			for i := 0; i < b.N; i++ {
				if err := client.qp.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				if _, err := client.cq.Wait(ctx, wcs[:]); err != nil || wcs[0].Status != WCSuccess {
					b.Fatal(err, wcs[0].Err())
				}
			}
			c.report(b)
		})
	}
}

// BenchmarkImmediate is one Immediate Data message (OpSendImm) and its
// receive completion at the peer, which reposts the receive: the
// immediate-data path on both sides, one message in flight.
func BenchmarkImmediate(b *testing.B) {
	client, server := benchPair(b)
	rbuf := server.register(b, 64, LocalWrite)
	rwr := RecvWR{SGL: []SGE{rbuf.SGE(0, 64)}}
	if err := server.qp.PostRecv(rwr); err != nil {
		b.Fatal(err)
	}
	var wcs [1]WorkCompletion
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	c := startCost()
	for i := 0; i < b.N; i++ {
		if err := client.qp.PostSend(SendWR{Op: OpSendImm, Imm: uint64(i)}); err != nil {
			b.Fatal(err)
		}
		if _, err := server.cq.Wait(ctx, wcs[:]); err != nil || wcs[0].Imm != uint64(i) {
			b.Fatal(err, wcs[0])
		}
		if err := server.qp.PostRecv(rwr); err != nil {
			b.Fatal(err)
		}
	}
	c.report(b)
}
