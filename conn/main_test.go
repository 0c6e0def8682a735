package conn

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test in the package ends with no goroutine of the package left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
