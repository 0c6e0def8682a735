package conn

import (
	"runtime/debug"
	"sync/atomic"
	"unsafe"
)

// aligned8 reports whether b starts at an 8-aligned address.
func aligned8(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%8 == 0
}

// store8 stores the 8 bytes of src into the aligned word dst with one
// 64-bit store, so that no reader of the word sees part of the new value.
func store8(dst, src []byte) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[0])), *(*uint64)(unsafe.Pointer(&src[0])))
}

// load8 loads the aligned word at b with one 64-bit load.
func load8(b []byte) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0])))
}

// guardFault runs f, which touches memory of the region x (registered
// with MayFault), so that a fault on that memory becomes a *MemoryFaultError
// instead of ending the process. Faults at other addresses, and every
// other panic, go on as they were.
func guardFault(x *regionExt, f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if v := recover(); v != nil {
			if a, ok := v.(interface{ Addr() uintptr }); ok && x.contains(a.Addr()) {
				err = &MemoryFaultError{Addr: a.Addr()}
				return
			}
			panic(v)
		}
	}()
	return f()
}

// contains reports whether addr lies inside the region's memory.
func (x *regionExt) contains(addr uintptr) bool {
	b := x.mem
	start := uintptr(unsafe.Pointer(&b[0]))
	return addr >= start && addr-start < uintptr(len(b))
}
