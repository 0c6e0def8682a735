//go:build !race

package pmemsink

const raceOn = false
