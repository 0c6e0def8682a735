package conn

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"
)

// limitedLog writes a listener's lines about connections it turned away,
// at most one a second: a flood of hostile clients yields one line and a
// count, not a line each.
type limitedLog struct {
	l *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newLimitedLog(l *slog.Logger) *limitedLog { return &limitedLog{l: l} }

func (g *limitedLog) refused(remote net.Addr, why string) {
	if g == nil || g.l == nil {
		return
	}
	g.mu.Lock()
	now := time.Now()
	if now.Sub(g.last) < time.Second {
		g.suppressed++
		g.mu.Unlock()
		return
	}
	n := g.suppressed
	g.last, g.suppressed = now, 0
	g.mu.Unlock()
	g.l.LogAttrs(context.Background(), slog.LevelWarn, "iwarp: connection refused",
		slog.String("remote", addrString(remote)), slog.String("reason", why), slog.Int("suppressed", n))
}

func (g *limitedLog) blocked(remote net.Addr, limit int, window time.Duration) {
	if g == nil || g.l == nil {
		return
	}
	g.l.LogAttrs(context.Background(), slog.LevelWarn, "iwarp: address refused after protection failures",
		slog.String("remote", addrString(remote)), slog.Int("failures", limit), slog.Duration("window", window))
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
