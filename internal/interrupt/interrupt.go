// Package interrupt gives a command the context its work runs under: the
// first SIGINT or SIGTERM cancels it, with the signal as its cause, so a
// server can close its connections and say why it stopped; a second
// signal kills the process as usual.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signal is the cause of a context a signal cancelled.
type Signal struct{ os.Signal }

func (e Signal) Error() string { return e.Signal.String() }

// Context returns a context that the first SIGINT or SIGTERM cancels,
// with a Signal as its cause. stop releases the signals and cancels the
// context (with no cause).
func Context() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			// The next signal is the system's again: a stuck shutdown
			// can still be killed with ^C.
			signal.Stop(ch)
			cancel(Signal{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}
