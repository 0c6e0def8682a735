package testutil

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// IwtestFields parses the "KEY k=v k=v …" lines that iwtest (the C program
// of interop/siw/cprog and iwarp-peer iwtest) prints: one map for each
// line whose first word is key. Quoted values lose their quotes.
func IwtestFields(out, key string) []map[string]string {
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

// RequireIwtestAllOK checks one side's output of an iwtest session: a
// RESULT with status=ok for every test at every size in both directions,
// nothing else failed, and a SUMMARY that counts them all as ok.
func RequireIwtestAllOK(tb testing.TB, out string, tests, sizes []string) {
	tb.Helper()
	seen := map[string]bool{}
	for _, r := range IwtestFields(out, "RESULT") {
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
	sum := IwtestFields(out, "SUMMARY")
	require.Len(tb, sum, 1, out)
	assert.Equal(tb, strconv.Itoa(len(tests)*len(sizes)*2), sum[0]["ok"], out)
	assert.Equal(tb, "0", sum[0]["failed"], out)
}
