package main

import (
	"io"
	"os"

	"github.com/iwarp-go/iwarp-go/internal/syncwriter"
)

// shared returns w for writers in several goroutines: a file as it is
// (the system orders its writes), anything else behind a lock, since the
// logger writes from conn's goroutines beside the command's own lines.
func shared(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return syncwriter.New(w)
}
