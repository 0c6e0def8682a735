//go:build !linux && !darwin

package conn

// raiseNoFile leaves the file limit alone where syscall.Rlimit is not two
// uint64s (FreeBSD's are int64) or there is none (Windows): the scale
// benchmarks run with what the process has, and Go has already raised the
// soft limit to the hard one where there is one.
func raiseNoFile(want uint64) (restore func(), err error) { return func() {}, nil }
