package rpma

import (
	"bytes"
	"testing"
)

func FuzzParseFlushRequest(f *testing.F) {
	f.Add(FlushRequest{Offset: 0, Length: 1024, OpContext: 0xF01D}.Append(nil))
	f.Add([]byte{0x19, 3, 0, 0, 0, 0, 0, 0, 0, 0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0x11, 2, 0, 0, 0, 0, 0, 0, 0, 0x20, 0x01})
	f.Add([]byte{0x32, 0x7f})
	f.Add([]byte{0x0b, 0x0c})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		r, err := ParseFlushRequest(b)
		if !bytes.Equal(in, b) {
			t.Fatal("decoder modified its input")
		}
		if err != nil {
			return
		}
		enc := r.Append(nil)
		back, err := ParseFlushRequest(enc)
		if err != nil || back != r {
			t.Fatalf("re-encoding %+v: %v %+v", r, err, back)
		}
		// The canonical encoding is the only 27-byte one with fields 1, 2,
		// 3 in order.
		if len(b) == FlushRequestLen && b[0] == 0x09 && b[9] == 0x11 && b[18] == 0x19 && !bytes.Equal(enc, b) {
			t.Fatalf("canonical % x re-encoded as % x", b, enc)
		}
	})
}

func FuzzParseFlushResponse(f *testing.F) {
	f.Add(FlushResponse{OpContext: 0xF01D}.Append(nil))
	f.Add([]byte{0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseFlushResponse(b)
		if err != nil {
			return
		}
		back, err := ParseFlushResponse(r.Append(nil))
		if err != nil || back != r {
			t.Fatalf("re-encoding %+v: %v %+v", r, err, back)
		}
	})
}

func FuzzParseCommonData(f *testing.F) {
	c, _ := SinkCommonData(0x1000, 1<<20, 0x1234_5601, 8, true)
	f.Add(c.Append(nil))
	f.Add(make([]byte, CommonDataLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCommonData(b)
		if err != nil {
			return
		}
		enc := c.Append(nil)
		back, err := ParseCommonData(enc)
		if err != nil || back != c {
			t.Fatalf("re-encoding %+v: %v %+v", c, err, back)
		}
		if len(enc) != CommonDataLen {
			t.Fatalf("encoded %d bytes", len(enc))
		}
		// The MR descriptor decoded is the one at descriptors[0].
		if mr, err := ParseMRDescriptor(b[4:]); err != nil || mr != c.MR {
			t.Fatalf("MR descriptor %+v vs %+v (%v)", mr, c.MR, err)
		}
	})
}

func FuzzParseMRDescriptor(f *testing.F) {
	f.Add(MRDescriptor{Addr: 1, Length: 2, RKey: 3, Usage: UsageSink}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseMRDescriptor(b)
		if err != nil {
			return
		}
		if enc := d.Append(nil); !bytes.Equal(enc, b[:MRDescriptorLen]) {
			t.Fatalf("% x re-encoded as % x", b[:MRDescriptorLen], enc)
		}
	})
}
