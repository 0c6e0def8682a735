package connflags

import (
	"flag"
	"fmt"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Limits are a server's guard against clients that hold it: the library
// leaves connections unbounded and never idles one out (an RDMA connection
// may sit idle for hours), but a test endpoint exposed to whoever connects
// should not let a few thousand held connections exhaust it. A command
// registers them with its flags and adds Options() to its listener's
// options.
type Limits struct {
	MaxConns   int
	Handshakes int
	Idle       time.Duration
}

// Server defaults: above what a test or benchmark uses (bench --qps
// included), far below what exhausts the process (an idle connection costs
// about 50 KB, so 1024 of them 50 MB).
const (
	DefaultMaxConns   = 1024
	DefaultHandshakes = 64
	DefaultIdle       = 5 * time.Minute
)

// Register adds --max-conns, --max-handshakes and --idle-timeout to fs,
// with the defaults.
func (l *Limits) Register(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxConns, "max-conns", DefaultMaxConns, "server: connections served at once (0: no bound)")
	fs.IntVar(&l.Handshakes, "max-handshakes", DefaultHandshakes, "server: MPA Requests read at once (0: the library's default)")
	fs.DurationVar(&l.Idle, "idle-timeout", DefaultIdle, "server: close a connection idle for this long (0: never)")
}

// Check refuses a negative limit; 0 lifts one.
func (l *Limits) Check() error {
	switch {
	case l.MaxConns < 0:
		return fmt.Errorf("--max-conns %d: must not be negative", l.MaxConns)
	case l.Handshakes < 0:
		return fmt.Errorf("--max-handshakes %d: must not be negative", l.Handshakes)
	case l.Idle < 0:
		return fmt.Errorf("--idle-timeout %v: must not be negative", l.Idle)
	}
	return nil
}

// Options are the listener options that apply the limits.
func (l *Limits) Options() []conn.Option {
	var opts []conn.Option
	if l.MaxConns > 0 {
		opts = append(opts, conn.WithMaxConnections(l.MaxConns))
	}
	if l.Handshakes > 0 {
		opts = append(opts, conn.WithMaxHandshakes(l.Handshakes))
	}
	if l.Idle > 0 {
		opts = append(opts, conn.WithIdleTimeout(l.Idle))
	}
	return opts
}
