package conn

import (
	"testing"

	"github.com/iwarp-go/iwarp-go/internal/testutil"
)

// cost is testutil.Cost for the benchmarks here: cpu-ns/op and ctxsw/op.
type cost struct{ c testutil.Cost }

func startCost() cost { return cost{testutil.StartCost()} }

func (c cost) report(b *testing.B) { c.c.Report(b) }
