package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/iwarp-go/iwarp-go/conn"
)

// logKey is the context key of the logger the command line gives every
// connection it makes (connLog).
type logKey struct{}

// withLog returns ctx carrying the commands' logger, on w: with trace
// (iwarp-peer -d) conn's whole account of each connection (setup,
// Terminates, teardown); without, its warnings only: the connections a
// server's listener turns away, which conn logs at most once a second.
func withLog(ctx context.Context, w io.Writer, trace bool) context.Context {
	level := slog.LevelWarn
	if trace {
		level = slog.LevelDebug
	}
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	return context.WithValue(ctx, logKey{}, slog.New(h))
}

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

// connLog returns the connection option that logs through ctx's logger.
func connLog(ctx context.Context) []conn.Option {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return []conn.Option{conn.WithLogger(l)}
	}
	return nil
}
