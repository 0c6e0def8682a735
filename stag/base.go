package stag

import (
	"fmt"
	"unsafe"
)

// Base chooses the tagged offset that addresses the first byte of a region.
// Peers address a region by (STag, TO); the region covers the TOs
// [base, base+len), and a lookup works on TO − base.
type Base struct {
	va bool
	to uint64
}

// BaseZero makes TO 0 address the first byte (zero-based regions).
func BaseZero() Base { return Base{} }

// BaseVA makes the address of the buffer's first byte its base TO, the way
// verbs applications such as rping and perftest advertise raw virtual
// addresses. The address is only advertised and compared, never dereferenced:
// Go's heap does not move objects, and the region keeps the buffer alive.
func BaseVA() Base { return Base{va: true} }

// BaseAt makes to the base TO.
func BaseAt(to uint64) Base { return Base{to: to} }

// IsVA reports whether b is BaseVA.
func (b Base) IsVA() bool { return b.va }

func (b Base) resolve(buf []byte) uint64 {
	if b.va {
		return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	return b.to
}

// String describes the choice.
func (b Base) String() string {
	if b.va {
		return "BaseVA"
	}
	return fmt.Sprintf("BaseAt(0x%x)", b.to)
}
