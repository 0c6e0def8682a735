// Package connlog carries the logger a command line gives every
// connection it makes: iwarp-peer -d selects conn's whole account of each
// connection, and without it a server still reports, at Warn, the
// connections its listener turns away.
package connlog

import (
	"context"
	"io"
	"log/slog"

	"github.com/iwarp-go/iwarp-go/conn"
)

type key struct{}

// With returns ctx carrying a text logger on w: with trace conn's whole
// account of each connection (setup, Terminates, teardown, at Debug and
// Info); without, its warnings only: the connections a server's listener
// turns away, which conn logs at most once a second.
func With(ctx context.Context, w io.Writer, trace bool) context.Context {
	level := slog.LevelWarn
	if trace {
		level = slog.LevelDebug
	}
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	return context.WithValue(ctx, key{}, slog.New(h))
}

// Options returns the connection option that logs through ctx's logger;
// none if ctx has none.
func Options(ctx context.Context) []conn.Option {
	if l, ok := ctx.Value(key{}).(*slog.Logger); ok {
		return []conn.Option{conn.WithLogger(l)}
	}
	return nil
}
