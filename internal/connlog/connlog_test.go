package connlog

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func logger(t *testing.T, ctx context.Context) *slog.Logger {
	t.Helper()
	l, ok := ctx.Value(key{}).(*slog.Logger)
	require.True(t, ok, "the context carries the logger")
	return l
}

// Without trace only warnings reach the writer; with it, everything from
// Debug up.
func TestWith_Levels(t *testing.T) {
	var quiet, loud bytes.Buffer
	for _, c := range []struct {
		w     *bytes.Buffer
		trace bool
	}{{&quiet, false}, {&loud, true}} {
		l := logger(t, With(context.Background(), c.w, c.trace))
		l.Debug("iwarp: setup")
		l.Info("iwarp: connected")
		l.Warn("iwarp: connection refused", "reason", "full")
	}
	require.NotContains(t, quiet.String(), "setup")
	require.NotContains(t, quiet.String(), "connected")
	require.Contains(t, quiet.String(), `level=WARN msg="iwarp: connection refused" reason=full`)
	for _, s := range []string{"level=DEBUG", `level=INFO msg="iwarp: connected"`, "level=WARN"} {
		require.Contains(t, loud.String(), s)
	}
}

func TestOptions(t *testing.T) {
	require.Empty(t, Options(context.Background()), "no logger, no option")
	require.Len(t, Options(With(context.Background(), &bytes.Buffer{}, false)), 1)
}
