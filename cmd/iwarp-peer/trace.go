package main

import (
	"io"
	"os"
	"sync"
)

// shared returns w for writers in several goroutines: a file as it is
// (the system orders its writes), anything else behind a lock, since the
// logger writes from conn's goroutines beside the command's own lines.
func shared(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
