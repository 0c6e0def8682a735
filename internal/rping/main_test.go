package rping

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test's connections and goroutines must be gone when it ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
