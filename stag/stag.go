package stag

import "fmt"

// STag is a Steering Tag: a 24-bit index in the upper bits and an 8-bit key
// chosen by the owner of the region in the lower bits (the layout siw uses:
// lookups use the index, then require the whole 32-bit value to match).
type STag uint32

// Index bits and key bits of an STag.
const (
	IndexBits = 24
	KeyBits   = 8

	// MaxIndex is the largest index an STag can carry.
	MaxIndex = 1<<IndexBits - 1

	// FirstIndex is the smallest index a Table hands out. Indices below it
	// are reserved so that no registered STag is below 0x10000: STag 0 is
	// special to some hardware, siw's zero-length Write RTR uses STag 1,
	// cxgb4 uses 1 in its Read RTR and irdma builds its Read RTR with 0x1234
	// and 0xABCD. A peer's RTR therefore never names a live region here.
	FirstIndex = 0x100
)

// MakeSTag builds an STag from an index (only its low 24 bits are used) and a
// key.
func MakeSTag(index uint32, key uint8) STag {
	return STag(index&MaxIndex)<<KeyBits | STag(key)
}

// Index returns the 24-bit index that selects the region.
func (s STag) Index() uint32 { return uint32(s) >> KeyBits }

// Key returns the 8-bit consumer key.
func (s STag) Key() uint8 { return uint8(s) }

// String formats the STag the way drivers and Wireshark print it.
func (s STag) String() string { return fmt.Sprintf("0x%08x", uint32(s)) }
