//go:build race

package mpa

import "unsafe"

// dmaCopy, under the race detector, copies without telling it. Remote
// access to registered memory is not synchronized with the program by
// design: a peer reads a region the application wrote, with only the
// network between them, and the detector cannot see that edge. The
// library's other accesses of the kind — writev and readv on the region,
// the CRC's assembly — are invisible to it already; this keeps the copies
// in line with them, so that a program's race tests report its own races
// and not RDMA's. It is slow and used only in race builds.
//
//go:norace
func dmaCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	if uintptr(d) > uintptr(s) && uintptr(d) < uintptr(s)+uintptr(n) {
		for i := n - 1; i >= 0; i-- { // overlapping, forwards would clobber
			*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(s, i))
		}
		return n
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(d, i)) = *(*uint64)(unsafe.Add(s, i))
	}
	for ; i < n; i++ {
		*(*byte)(unsafe.Add(d, i)) = *(*byte)(unsafe.Add(s, i))
	}
	return n
}
