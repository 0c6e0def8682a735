package siwpeer

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

func TestFollowCopiesWholeLinesThenTheRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	var got testutil.Buffer
	stop := make(chan struct{})
	done := follow(path, &got, stop)
	time.Sleep(3 * followPoll) // the file does not exist yet
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("one\ntw")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return got.String() == "one\n" }, 5*time.Second, followPoll/2)
	time.Sleep(3 * followPoll)
	assert.Equal(t, "one\n", got.String(), "half a line waits for its end")
	_, err = f.WriteString("o\nthree")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return got.String() == "one\ntwo\n" }, 5*time.Second, followPoll/2)
	close(stop)
	<-done
	assert.Equal(t, "one\ntwo\nthree", got.String(), "at the end, the rest")
}
