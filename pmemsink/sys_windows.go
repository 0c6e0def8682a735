package pmemsink

import "fmt"

// Windows has no shared file mapping with msync semantics that this
// package supports; every Sink method exists, Open fails.
func openSink(path string, _ int64, _ *config) (*Sink, error) {
	return nil, fmt.Errorf("pmemsink: open %s: %w", path, ErrUnsupported)
}

func sysMsync([]byte) error   { return ErrUnsupported }
func sysMunmap([]byte) error  { return ErrUnsupported }
func sysReserve([]byte) error { return ErrUnsupported }
func sysCloseFD(int) error    { return ErrUnsupported }

func sysPopulateWrite([]byte) error { return ErrUnsupported }
