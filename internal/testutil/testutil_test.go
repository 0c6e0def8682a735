package testutil

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

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

func TestIwtestFields(t *testing.T) {
	out := "LISTENING port=7175\nESTABLISHED role=server ird=16 ord=16 private_data_len=2 private_data=6869 text=\"hi\"\nnoise\n"
	require.Equal(t, []map[string]string{{"role": "server", "ird": "16", "ord": "16", "private_data_len": "2",
		"private_data": "6869", "text": "hi"}}, IwtestFields(out, "ESTABLISHED"))
	require.Empty(t, IwtestFields(out, "RESULT"))
}

func TestRequireIwtestAllOK(t *testing.T) {
	ok := "RESULT role=client test=write dir=c2s size=1 iters=1 status=ok\n" +
		"RESULT role=client test=write dir=s2c size=1 iters=1 status=ok\n" +
		"SUMMARY role=client ok=2 failed=0\n"
	RequireIwtestAllOK(t, ok, []string{"write"}, []string{"1"})
	for name, out := range map[string]string{
		"a direction missing": strings.Replace(ok, "RESULT role=client test=write dir=s2c size=1 iters=1 status=ok\n", "", 1),
		"a failure":           strings.Replace(ok, "dir=s2c size=1 iters=1 status=ok", "dir=s2c size=1 iters=1 status=data", 1),
		"no summary":          ok[:strings.Index(ok, "SUMMARY")],
	} {
		ft := &failsOnly{}
		func() {
			defer func() { _ = recover() }() // require's FailNow
			RequireIwtestAllOK(ft, out, []string{"write"}, []string{"1"})
		}()
		require.True(t, ft.failed, name)
	}
}

// failsOnly records whether a check failed, without failing the test.
type failsOnly struct {
	testing.TB
	failed bool
}

func (f *failsOnly) Helper()               {}
func (f *failsOnly) Name() string          { return "failsOnly" }
func (f *failsOnly) Errorf(string, ...any) { f.failed = true }
func (f *failsOnly) FailNow()              { f.failed = true; panic("FailNow") }
