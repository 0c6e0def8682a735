//go:build !linux

package mpa

// readvState is empty where the Reader has no readv fast path: direct
// payload reads are plain Reads into the destination.
type readvState struct{}

// initReadv has nothing to set up; it clears the state like the Linux
// version sets it, so that the field is in use on every system.
func (r *Reader) initReadv() { r.rv = readvState{} }

// readDirect reads payload into p, bypassing the buffer.
func (r *Reader) readDirect(p []byte) (int, error) { return r.r.Read(p) }

// canAwaitIdle: without the fast path the Reader keeps its buffer.
func (r *Reader) canAwaitIdle() bool { return false }

// awaitIdle is never called where canAwaitIdle is false.
func (r *Reader) awaitIdle() error { return nil }
