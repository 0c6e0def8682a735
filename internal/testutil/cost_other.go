//go:build !unix

package testutil

import (
	"testing"
	"time"
)

// Cost is the process's CPU time and context switches at a point of a
// benchmark; this platform does not report them.
type Cost struct{}

// StartCost reads the process's cost so far.
func StartCost() Cost { return Cost{} }

// Report adds nothing on this platform.
func (Cost) Report(*testing.B) {}

// CPUSince reports nothing on this platform.
func (Cost) CPUSince() (time.Duration, bool) { return 0, false }
