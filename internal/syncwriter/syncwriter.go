// Package syncwriter serialises writes to one io.Writer from several
// goroutines: a command's own lines beside a logger in conn's goroutines,
// a persistent server's connections, a guest job's output followers.
package syncwriter

import (
	"io"
	"sync"
)

// Writer writes to W, one Write at a time.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// New returns a Writer for w.
func New(w io.Writer) *Writer { return &Writer{W: w} }

// Write writes p to the underlying writer under the lock.
func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}
