package conntest

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines parses the report lines of out that start with key: "KEY k=v
// k=v …", one map per line, in order. Fields are split at spaces, inside
// quotes too; the double quotes around a value are dropped. This is the format
// of interop/siw/cprog/PROTOCOL.md §8, which the C iwtest program and
// iwarp-peer iwtest both print.
func Lines(out, key string) []map[string]string {
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != key {
			continue
		}
		row := map[string]string{}
		for _, kv := range f[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				row[k] = strings.Trim(v, `"`)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// RequireAllOK checks one side's output of an iwtest session: exactly one
// RESULT with status=ok for every test at every size in both directions,
// and a SUMMARY that counts them all as ok and none failed.
func RequireAllOK(tb testing.TB, out string, tests, sizes []string) {
	tb.Helper()
	rows := Lines(out, "RESULT")
	require.Len(tb, rows, len(tests)*len(sizes)*2, out)
	seen := map[string]bool{}
	for _, r := range rows {
		assert.Equal(tb, "ok", r["status"], "%v\n%s", r, out)
		seen[r["test"]+"/"+r["size"]+"/"+r["dir"]] = true
	}
	for _, t := range tests {
		for _, s := range sizes {
			for _, d := range []string{"c2s", "s2c"} {
				assert.True(tb, seen[t+"/"+s+"/"+d], "no RESULT for %s size %s %s\n%s", t, s, d, out)
			}
		}
	}
	sum := Lines(out, "SUMMARY")
	require.Len(tb, sum, 1, out)
	assert.Equal(tb, strconv.Itoa(len(rows)), sum[0]["ok"], out)
	assert.Equal(tb, "0", sum[0]["failed"], out)
}

// LockedBuffer is a bytes.Buffer that a test may read while a program
// still writes to it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
