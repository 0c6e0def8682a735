//go:build !linux

package mpa

// readvState is empty where the Reader has no readv fast path: direct
// payload reads are plain Reads into the destination.
type readvState struct{}

func (r *Reader) initReadv() {}

// readDirect reads payload into p, bypassing the buffer.
func (r *Reader) readDirect(p []byte) (int, error) { return r.r.Read(p) }
