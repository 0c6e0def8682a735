package connlog

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
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

// A file is used as it is; any other writer is locked, so that lines
// written at once from several goroutines arrive whole.
func TestShared(t *testing.T) {
	require.Equal(t, os.Stderr, Shared(os.Stderr))
	var b bytes.Buffer
	w := Shared(&b)
	require.IsType(t, &lockedWriter{}, w)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				w.Write([]byte(strings.Repeat(string(rune('a'+i)), 32) + "\n"))
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 800)
	for _, l := range lines {
		require.Equal(t, strings.Repeat(l[:1], 32), l)
	}
}
