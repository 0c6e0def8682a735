//go:build unix

package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A real SIGTERM cancels the command's context, with the signal as its
// cause.
func TestInterruptible(t *testing.T) {
	ctx, stop := interruptible()
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	require.EqualError(t, context.Cause(ctx), "terminated")
}
