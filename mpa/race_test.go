//go:build race

package mpa

// raceEnabled: the race detector makes sync.Pool drop items on purpose,
// so allocation counts that rely on a pool are not checked under it.
const raceEnabled = true
