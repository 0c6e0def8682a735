package conntest

import (
	"bytes"
	"strings"
	"sync"
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
