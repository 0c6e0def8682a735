package testutil

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	var n int
	var on bool
	ParseFlags(t, func(fs *flag.FlagSet) {
		fs.IntVar(&n, "n", 1, "")
		fs.BoolVar(&on, "on", false, "")
	}, " -n  7 --on ")
	require.Equal(t, 7, n)
	require.True(t, on)
}

func TestUnhex(t *testing.T) {
	require.Equal(t, []byte{0xc0, 0x01, 0xba, 0xbe}, Unhex(t, "c0 01\n\tbabe"))
	require.Empty(t, Unhex(t, ""))
}

func TestBuffer_ConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 400, bytes.Count([]byte(b.String()), []byte("\n")))
}

func TestAllocated(t *testing.T) {
	var keep []byte
	n := Allocated(func() { keep = make([]byte, 1<<20) })
	require.GreaterOrEqual(t, n, uint64(1<<20))
	require.Len(t, keep, 1<<20)
}

// Every listed capture is found from this package's directory, and it is a
// pcap file.
func TestCapturePath(t *testing.T) {
	for _, name := range SiwCaptures {
		b, err := os.ReadFile(CapturePath(t, name+".pcap"))
		require.NoError(t, err)
		require.Greater(t, len(b), 24, name)
		require.Equal(t, []byte{0xd4, 0xc3, 0xb2, 0xa1}, b[:4], "%s: little-endian pcap magic", name)
	}
	require.FileExists(t, CapturePath(t, "pcap-summary.txt"))
}

// A missing tool skips the test on a developer machine.
func TestRequireTool_MissingSkips(t *testing.T) {
	t.Setenv("IWARP_REQUIRE_TOOLS", "")
	skipped := false
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		RequireTool(t, "iwarp-go-no-such-tool")
		t.Error("RequireTool returned for a missing tool")
	})
	require.True(t, skipped)
}
