package main

import (
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// limitsFlag is a server's guard against clients that hold it: the library
// leaves connections unbounded and never idles one out (an RDMA connection
// may sit idle for hours), but a test endpoint exposed to whoever connects
// should not let a few thousand held connections exhaust it. A command
// registers it with its flags (l := f.limits()) and adds l.options() to
// its listener's options.
type limitsFlag struct {
	maxConns   int
	handshakes int
	idle       time.Duration
}

// Server defaults: above what a test or benchmark uses (bench --qps
// included), far below what exhausts the process (an idle connection costs
// about 50 KB, so 1024 of them 50 MB).
const (
	defaultMaxConns   = 1024
	defaultHandshakes = 64
	defaultIdle       = 5 * time.Minute
)

// limitsUsage describes the flags, for usages written by hand.
const limitsUsage = `server limits (0 lifts one):
      --max-conns N       connections served at once, the rest closed at once (default 1024)
      --max-handshakes N  MPA Requests read at once (default 64)
      --idle-timeout D    close a connection with no traffic for D (default 5m)
`

// limits registers --max-conns, --max-handshakes and --idle-timeout.
func (f *flags) limits() *limitsFlag {
	l := &limitsFlag{}
	f.IntVar(&l.maxConns, "max-conns", defaultMaxConns, "server: connections served at once (0: no bound)")
	f.IntVar(&l.handshakes, "max-handshakes", defaultHandshakes, "server: MPA Requests read at once (0: the library's default)")
	f.DurationVar(&l.idle, "idle-timeout", defaultIdle, "server: close a connection idle for this long (0: never)")
	f.limitsFlag = l
	return l
}

func (l *limitsFlag) check(f *flags) error {
	switch {
	case l.maxConns < 0:
		return f.bad("--max-conns %d: must not be negative", l.maxConns)
	case l.handshakes < 0:
		return f.bad("--max-handshakes %d: must not be negative", l.handshakes)
	case l.idle < 0:
		return f.bad("--idle-timeout %v: must not be negative", l.idle)
	}
	return nil
}

// options are the listener options that apply the limits.
func (l *limitsFlag) options() []conn.Option {
	var opts []conn.Option
	if l.maxConns > 0 {
		opts = append(opts, conn.WithMaxConnections(l.maxConns))
	}
	if l.handshakes > 0 {
		opts = append(opts, conn.WithMaxHandshakes(l.handshakes))
	}
	if l.idle > 0 {
		opts = append(opts, conn.WithIdleTimeout(l.idle))
	}
	return opts
}
