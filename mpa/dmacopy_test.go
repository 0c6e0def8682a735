package mpa

import (
	"bytes"
	"testing"
)

// dmaCopy is copy, in race builds too (where it is a loop of its own).
func TestDMACopyIsCopy(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i*31 + 7)
	}
	for n := 0; n <= 70; n++ {
		for off := 0; off < 9; off++ {
			want := make([]byte, 100)
			got := make([]byte, 100)
			k1 := copy(want[off:], src[off:off+n])
			k2 := dmaCopy(got[off:], src[off:off+n])
			if k1 != k2 || !bytes.Equal(want, got) {
				t.Fatalf("n=%d off=%d: dmaCopy differs from copy", n, off)
			}
		}
	}
	// Overlapping, both ways.
	for _, shift := range []int{1, 9, -1, -9} {
		want := bytes.Clone(src)
		got := bytes.Clone(src)
		if shift > 0 {
			copy(want[shift:], want[:200])
			dmaCopy(got[shift:], got[:200])
		} else {
			copy(want, want[-shift:200])
			dmaCopy(got, got[-shift:200])
		}
		if !bytes.Equal(want, got) {
			t.Fatalf("overlap %d: dmaCopy differs from copy", shift)
		}
	}
}
