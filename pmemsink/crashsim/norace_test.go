//go:build !race

package crashsim

const raceOn = false
