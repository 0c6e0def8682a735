package interrupt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// stop cancels the context without a cause and ends the goroutine that
// waits for a signal.
func TestContext_Stop(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, stop := Context()
	require.NoError(t, ctx.Err())
	stop()
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	stop() // a second stop is harmless
}
