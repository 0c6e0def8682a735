package testutil

import (
	"flag"
	"strings"
	"testing"
)

// ParseFlags parses a command line of space-separated words with the
// flags register adds to a fresh flag set; a parse error fails the test.
// It is for packages that hand a command its flag groups.
func ParseFlags(tb testing.TB, register func(*flag.FlagSet), args string) {
	tb.Helper()
	fs := flag.NewFlagSet(tb.Name(), flag.ContinueOnError)
	register(fs)
	if err := fs.Parse(strings.Fields(args)); err != nil {
		tb.Fatalf("parsing %q: %v", args, err)
	}
}
