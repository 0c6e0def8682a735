package rpma

import "strings"

// Usage is the set of RPMA_MR_USAGE_* bits carried in an MR descriptor
// (src/include/librpma.h; src/mr.c static-asserts that they fit a uint8_t).
type Usage uint8

// The usage bits of librpma 1.2.
const (
	UsageReadSrc             Usage = 1 << 0 // RPMA_MR_USAGE_READ_SRC
	UsageReadDst             Usage = 1 << 1 // RPMA_MR_USAGE_READ_DST
	UsageWriteSrc            Usage = 1 << 2 // RPMA_MR_USAGE_WRITE_SRC
	UsageWriteDst            Usage = 1 << 3 // RPMA_MR_USAGE_WRITE_DST
	UsageFlushTypeVisibility Usage = 1 << 4 // RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY
	UsageFlushTypePersistent Usage = 1 << 5 // RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT
	UsageSend                Usage = 1 << 6 // RPMA_MR_USAGE_SEND
	UsageRecv                Usage = 1 << 7 // RPMA_MR_USAGE_RECV
)

// What a sink advertises. rpma_flush() fails with RPMA_E_NOSUPP unless the
// remote descriptor carries the FLUSH_TYPE bit it is asked for (src/conn.c),
// so a sink always offers visibility; READ_SRC serves the example clients
// that read back (04, 07). The persistent variant may be advertised only
// where a completed flush really means durable.
const (
	// UsageSink = WRITE_DST | READ_SRC | FLUSH_TYPE_VISIBILITY = 0x19.
	UsageSink = UsageWriteDst | UsageReadSrc | UsageFlushTypeVisibility
	// UsageSinkPersistent adds FLUSH_TYPE_PERSISTENT: 0x39.
	UsageSinkPersistent = UsageSink | UsageFlushTypePersistent
)

var usageNames = [8]string{"READ_SRC", "READ_DST", "WRITE_SRC", "WRITE_DST",
	"FLUSH_TYPE_VISIBILITY", "FLUSH_TYPE_PERSISTENT", "SEND", "RECV"}

// String lists the bits joined by "|", or "0" for none.
func (u Usage) String() string {
	if u == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range usageNames {
		if u&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}
