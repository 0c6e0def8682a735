package main

import "github.com/iwarp-go/iwarp-go/internal/connflags"

// limitsUsage describes the server limits (connflags.Limits), for usages
// written by hand.
const limitsUsage = `server limits (0 lifts one):
      --max-conns N       connections served at once, the rest closed at once (default 1024)
      --max-handshakes N  MPA Requests read at once (default 64)
      --idle-timeout D    close a connection with no traffic for D (default 5m)
`

// limits registers --max-conns, --max-handshakes and --idle-timeout; parse
// checks them. A command adds l.Options() to its listener's options.
func (f *flags) limits() *connflags.Limits {
	l := &connflags.Limits{}
	l.Register(f.FlagSet)
	f.checks = append(f.checks, l.Check)
	return l
}
