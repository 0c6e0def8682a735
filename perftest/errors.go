package perftest

import (
	"errors"
	"fmt"
)

// Errors of a perftest run. Failures are returned wrapped with context;
// errors.Is finds these.
var (
	// ErrMessage: a message on the comm connection does not have the size
	// or content the step expects.
	ErrMessage = errors.New("perftest: bad message from the peer")
	// ErrVersion: the peer's version is one perftest refuses.
	ErrVersion = errors.New("perftest: incompatible peer version")
	// ErrConfig: the run's settings are invalid or unsupported.
	ErrConfig = errors.New("perftest: invalid configuration")
	// ErrProtocol: a step was driven out of order (a bug in the caller of
	// Protocol).
	ErrProtocol = errors.New("perftest: protocol step out of order")
	// ErrTest: the measurement failed: a work completion with an error,
	// or a lost connection.
	ErrTest = errors.New("perftest: test failed")
)

func msgLenError(what string, got, want int) error {
	return fmt.Errorf("%w: %s message of %d bytes, want %d", ErrMessage, what, got, want)
}
