//go:build !linux

package mpa

// writevState is empty where TryFlush has no non-blocking writev.
type writevState struct{}

func (w *Writer) initWritev() {}

// tryWritev attempts nothing: TryFlush leaves everything queued for Flush.
func (w *Writer) tryWritev() (n int, tried bool, err error) { return 0, false, nil }
