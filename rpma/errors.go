package rpma

import (
	"errors"
	"fmt"
)

// ErrMalformed is what every decoding error of this package unwraps to.
var ErrMalformed = errors.New("rpma: malformed input")

// DecodeError reports why a descriptor or message was rejected.
type DecodeError struct {
	// What names the format: "MR descriptor", "GPSPM_flush_request", ...
	What string
	// Offset is the byte offset of the problem in the input.
	Offset int
	// Reason says what was wrong.
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("rpma: %s: %s (at byte %d)", e.What, e.Reason, e.Offset)
}

// Unwrap returns ErrMalformed.
func (e *DecodeError) Unwrap() error { return ErrMalformed }

func malformed(what string, off int, format string, args ...any) error {
	return &DecodeError{What: what, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
