package syncwriter

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Writes from many goroutines into a bytes.Buffer (not safe for
// concurrent use) arrive whole, none interleaved; the race detector
// checks the rest.
func TestWritesArriveWhole(t *testing.T) {
	var b bytes.Buffer
	w := New(&b)
	line := strings.Repeat("x", 63) + "\n"
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				n, err := w.Write([]byte(line))
				if err != nil || n != len(line) {
					t.Errorf("Write: %d, %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.SplitAfter(b.String(), "\n")
	require.Len(t, lines, 801) // the last is empty
	for _, l := range lines[:800] {
		require.Equal(t, line, l)
	}
}
