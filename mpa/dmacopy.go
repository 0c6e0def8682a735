//go:build !race

package mpa

// dmaCopy copies between the Reader's or Writer's own storage and memory
// that peers reach remotely (placement into a destination, the staged copy
// of a source). See dmacopy_race.go for why it is a function of its own.
func dmaCopy(dst, src []byte) int { return copy(dst, src) }
