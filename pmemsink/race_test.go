//go:build race

package pmemsink

// raceOn scales randomized tests down under the race detector, which
// slows them tenfold; the full counts run in the plain test pass.
const raceOn = true
