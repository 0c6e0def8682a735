package pmemsink

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// Place copies src into dst (len(dst) ≥ len(src)). An 8-byte src going to
// an 8-aligned address is stored with one 64-bit atomic store, so a reader
// of that word never sees half of it: librpma's atomic write (an 8-byte
// RDMA Write at an 8-aligned offset) depends on it.
func Place(dst, src []byte) {
	if len(src) == 8 && len(dst) >= 8 {
		p := unsafe.Pointer(unsafe.SliceData(dst))
		if uintptr(p)%8 == 0 {
			atomic.StoreUint64((*uint64)(p), binary.NativeEndian.Uint64(src))
			return
		}
	}
	copy(dst, src)
}
