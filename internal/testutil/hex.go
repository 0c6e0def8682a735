package testutil

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Unhex decodes a hex dump written with any spacing and line breaks
// ("c0 01 ba be", or a wire dump over several lines). A malformed dump
// fails tb.
func Unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		tb.Fatalf("bad hex dump %q: %v", s, err)
	}
	return b
}
