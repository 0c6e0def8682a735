package rdmap

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts no goroutines; this keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
