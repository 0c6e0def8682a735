//go:build !linux

package mpa

// writevState is empty where TryFlush has no non-blocking writev.
type writevState struct{}

// initWritev has nothing to set up; it clears the state like the Linux
// version sets it, so that the field is in use on every system.
func (w *Writer) initWritev() { w.wv = writevState{} }

// tryWritev attempts nothing: TryFlush leaves everything queued for Flush.
func (w *Writer) tryWritev() (n int, tried bool, err error) { return 0, false, nil }
