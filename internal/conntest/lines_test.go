package conntest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLines(t *testing.T) {
	out := "LISTENING port=7175\nESTABLISHED role=server ird=16 ord=16 private_data_len=2 private_data=6869 text=\"hi\"\nnoise\n"
	require.Equal(t, []map[string]string{{"role": "server", "ird": "16", "ord": "16", "private_data_len": "2",
		"private_data": "6869", "text": "hi"}}, Lines(out, "ESTABLISHED"))
	require.Empty(t, Lines(out, "RESULT"))
}

func TestRequireAllOK(t *testing.T) {
	ok := "RESULT role=client test=write dir=c2s size=1 iters=1 status=ok\n" +
		"RESULT role=client test=write dir=s2c size=1 iters=1 status=ok\n" +
		"SUMMARY role=client ok=2 failed=0\n"
	RequireAllOK(t, ok, []string{"write"}, []string{"1"})
	for name, out := range map[string]string{
		"a direction missing": strings.Replace(ok, "RESULT role=client test=write dir=s2c size=1 iters=1 status=ok\n", "", 1),
		"a failure":           strings.Replace(ok, "dir=s2c size=1 iters=1 status=ok", "dir=s2c size=1 iters=1 status=data", 1),
		"a direction twice":   strings.Replace(ok, "dir=s2c", "dir=c2s", 1),
		"no summary":          ok[:strings.Index(ok, "SUMMARY")],
	} {
		ft := &failsOnly{}
		func() {
			defer func() { _ = recover() }() // require's FailNow
			RequireAllOK(ft, out, []string{"write"}, []string{"1"})
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
