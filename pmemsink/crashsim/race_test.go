//go:build race

package crashsim

// raceOn scales the randomized tests down under the race detector.
const raceOn = true
