package ddp

import "testing"

func BenchmarkAppendTagged(b *testing.B) {
	var buf [MaxHeaderLen]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = AppendTagged(buf[:0], MakeControl(true, true), 0x40, uint32(i), uint64(i))
	}
}

func BenchmarkAppendUntagged(b *testing.B) {
	var buf [MaxHeaderLen]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = AppendUntagged(buf[:0], MakeControl(false, true), 0x43, 0, 0, uint32(i), 0)
	}
}

var sinkU64 uint64

func BenchmarkParseTagged(b *testing.B) {
	wire := AppendTagged(nil, MakeControl(true, true), 0x40, 0x2222, 0x2000)
	b.ReportAllocs()
	for b.Loop() {
		h, _ := ParseTagged(wire)
		sinkU64 += uint64(h.STag()) + h.TO() + uint64(h.Control())
	}
}

func BenchmarkParseUntagged(b *testing.B) {
	wire := AppendUntagged(nil, MakeControl(false, true), 0x43, 0, 0, 1, 0)
	b.ReportAllocs()
	for b.Loop() {
		h, _ := ParseUntagged(wire)
		sinkU64 += uint64(h.QN()) + uint64(h.MSN()) + uint64(h.MO())
	}
}

func benchSegment(b *testing.B, tagged bool, size, mulpdu int) {
	msg := [][]byte{make([]byte, size)}
	var s Segmenter
	var hb [MaxHeaderLen]byte
	pb := make([][]byte, 0, 2)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if tagged {
			_ = s.StartTagged(msg, mulpdu, 0x40, 1, 0)
		} else {
			_ = s.StartUntagged(msg, mulpdu, 0x43, 0, 0, 1)
		}
		for {
			if _, ok := s.Next(hb[:0], pb[:0]); !ok {
				break
			}
		}
	}
}

func BenchmarkSegmentTagged64KiB_MSS1448(b *testing.B) { benchSegment(b, true, 64<<10, 1442) }
func BenchmarkSegmentTagged1MiB_64KiB(b *testing.B)    { benchSegment(b, true, 1<<20, 65535) }
func BenchmarkSegmentUntagged64B(b *testing.B)         { benchSegment(b, false, 64, 1442) }

func BenchmarkTaggedReceive(b *testing.B) {
	var r TaggedReceiver
	h := Tagged(AppendTagged(nil, MakeControl(true, true), 0x40, 0x2222, 0x2000))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Receive(h, 14+1428); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUntaggedReceive(b *testing.B) {
	qs := NewUntaggedQueues(3)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := uint32(1); b.Loop(); i++ {
		h := Untagged(AppendUntagged(buf[:0], MakeControl(false, true), 0x43, 0, 0, i, 0))
		if _, err := qs.Receive(h, 18+16, 16); err != nil {
			b.Fatal(err)
		}
	}
}
