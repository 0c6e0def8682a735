package capture

import "testing"

// BenchmarkAssemble reassembles one direction of 100,000 in-order segments
// with a retransmission every 100 (the shape of a long capture).
func BenchmarkAssemble(b *testing.B) {
	payload := make([]byte, 1000)
	for i := 0; i < b.N; i++ {
		var chunks []chunk
		for k := 0; k < 100000; k++ {
			off := int64(k) * 1000
			chunks = insertUncovered(chunks, off, off+1000, k, payload)
			if k%100 == 99 { // a retransmission of an earlier segment
				chunks = insertUncovered(chunks, off-50000, off-49000, k, payload)
			}
		}
		if len(chunks) != 100000 {
			b.Fatalf("%d chunks", len(chunks))
		}
	}
}
