package bench

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Streams run at once start from one instant; the phase is their sum over
// the longest of them, and a failed one fails it, named.
func TestTogether(t *testing.T) {
	var starts [4]time.Time
	var running, peak atomic.Int32
	res, err := together(4, func(i int, start time.Time) (phaseResult, error) {
		starts[i] = start
		peak.Store(max(peak.Load(), running.Add(1)))
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return phaseResult{messages: int64(i + 1), bytes: 10 * int64(i+1), elapsed: time.Duration(i+1) * time.Second}, nil
	})
	require.NoError(t, err)
	require.Equal(t, phaseResult{messages: 10, bytes: 100, elapsed: 4 * time.Second}, res)
	for _, s := range starts {
		require.Equal(t, starts[0], s)
	}
	require.Greater(t, peak.Load(), int32(1), "the streams ran at once")

	boom := errors.New("boom")
	_, err = together(3, func(i int, start time.Time) (phaseResult, error) {
		if i == 1 {
			return phaseResult{}, boom
		}
		return phaseResult{messages: 1}, nil
	})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "stream 2 of 3")

	one, err := together(1, func(i int, start time.Time) (phaseResult, error) {
		return phaseResult{messages: 5, elapsed: time.Since(start)}, nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(5), one.messages)
}
