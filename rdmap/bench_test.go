package rdmap

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/iwarp-go/iwarp-go/ddp"
)

func BenchmarkAppendWrite(b *testing.B) {
	var buf [MaxHeaderLen]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = AppendWrite(buf[:0], true, uint32(i), uint64(i))
	}
}

func BenchmarkAppendSend(b *testing.B) {
	var buf [MaxHeaderLen]byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = AppendSend(buf[:0], OpSendInvalidate, true, 7, uint32(i), 0)
	}
}

func BenchmarkAppendReadRequest(b *testing.B) {
	var buf [MaxHeaderLen]byte
	rr := ReadRequestFields{SinkSTag: 1, SinkTO: 2, Size: 3, SrcSTag: 4, SrcTO: 5}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = AppendReadRequest(buf[:0], uint32(i), rr)
	}
}

func benchParse(b *testing.B, hdr []byte, ulpdu int) {
	b.ReportAllocs()
	for b.Loop() {
		h, err := Parse(hdr, ulpdu)
		if err != nil || h.Len == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseWrite(b *testing.B) { benchParse(b, AppendWrite(nil, true, 0x2222, 0x2000), 1442) }
func BenchmarkParseReadResponse(b *testing.B) {
	benchParse(b, AppendReadResponse(nil, false, 0x2222, 0x2000), 1442)
}
func BenchmarkParseSend(b *testing.B) { benchParse(b, AppendSend(nil, OpSend, true, 0, 1, 0), 34) }
func BenchmarkParseReadRequest(b *testing.B) {
	benchParse(b, AppendReadRequest(nil, 1, ReadRequestFields{Size: 64}), 46)
}

func BenchmarkAppendTerminate(b *testing.B) {
	t := NewTerminate(ddp.NewError(termcode.DDPUntaggedNoBuffer, AppendSend(nil, OpSend, true, 0, 1, 0), 18))
	var buf [MaxTerminateLen]byte
	b.ReportAllocs()
	for b.Loop() {
		_ = AppendTerminate(buf[:0], &t)
	}
}

func BenchmarkParseTerminate(b *testing.B) {
	t := NewTerminate(ddp.NewError(termcode.DDPUntaggedNoBuffer, AppendSend(nil, OpSend, true, 0, 1, 0), 18))
	wire := AppendTerminate(nil, &t)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTerminate(wire); err != nil {
			b.Fatal(err)
		}
	}
}
