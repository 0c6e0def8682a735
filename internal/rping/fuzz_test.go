package rping

import (
	"bytes"
	"testing"
)

// Property: a 16-byte message parses and encodes back to itself, any
// other length is refused; a server's size advertisement is read only
// from "rping -S " and a positive number.
func FuzzParseInfo(f *testing.F) {
	f.Add(AppendInfo(nil, Info{Addr: 0x7f0000001000, RKey: 0x1234, Size: 64}))
	f.Add(appendServerSize(nil, 65535))
	f.Add([]byte("rping -S -1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseInfo(b)
		switch {
		case len(b) != InfoLen && err == nil:
			t.Fatalf("accepted %d bytes", len(b))
		case err == nil && !bytes.Equal(AppendInfo(nil, info), b):
			t.Fatalf("round trip: %x", b)
		}
		if n, ok := parseServerSize(b); ok && (n <= 0 || !bytes.HasPrefix(b, []byte(sizePrefix))) {
			t.Fatalf("read size %d from %q", n, b)
		}
	})
}
