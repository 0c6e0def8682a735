//go:build !conn_watched

package perftest

import (
	"fmt"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Until package conn has watched regions (conn.Watched, MR.LoadUint64),
// the two waits on memory that remote Writes fill — write_lat's and a
// send_bw client's credit — cannot be written without a data race, and
// those runs fail at once. Build with -tags conn_watched once conn has
// them.

func registerWatched(*conn.PD, []byte, conn.Access) (*conn.MR, error) {
	return nil, fmt.Errorf("%w: write_lat and a send_bw client need package conn's watched regions (conn.Watched, MR.LoadUint64)", ErrConfig)
}

func loadByte(*conn.MR, int) byte { return 0 }

func loadCredit(*conn.MR, int) uint32 { return 0 }

const watchedSupported = false
