//go:build unix

package interrupt

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A real SIGTERM cancels the command's context, with the signal as its
// cause.
func TestContext(t *testing.T) {
	ctx, stop := Context()
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	require.EqualError(t, context.Cause(ctx), "terminated")
	var s Signal
	require.True(t, errors.As(context.Cause(ctx), &s))
	require.Equal(t, syscall.SIGTERM, s.Signal)
}
