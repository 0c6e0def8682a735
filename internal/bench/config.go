package bench

import (
	"crypto/tls"
	"io"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// Port is the bench server's default port (perftest's).
const Port = 18515

// Config is a client's run.
type Config struct {
	// Op is "write", "read" or "send"; Size the message size (1 to
	// MaxSize).
	Op   string
	Size int
	// Iters is the number of messages of the bandwidth phase, or 0 for a
	// phase of Duration. LatIters is the number of round trips of the
	// latency phase (0 skips it), unless LatTimed: then it runs for
	// Duration.
	Iters, LatIters int
	Duration        time.Duration
	LatTimed        bool
	// Window is the number of work requests in flight in the bandwidth
	// phase (1 to MaxWindow).
	Window int
	// QPs is the number of queue pairs (connections) the bandwidth phase
	// streams over at once, each with Window in flight and, for a counted
	// phase, Iters messages (0 means 1; at most MaxQPs). The latency phase
	// runs on one.
	QPs int
	// CRC requires the MPA CRC; with CompareTCP the baseline is also run
	// with CRC32c computed and checked on both ends.
	CRC bool
	// Repeat runs everything this many times (at least once).
	Repeat int
	// CompareTCP also runs the phases over raw Go TCP, in this process.
	CompareTCP bool
	// Target is the server's address; with Loopback a server runs in this
	// process instead and Target is ignored.
	Target   string
	Loopback bool
	// Progress, if not nil, shows a progress line per phase (a terminal).
	Progress io.Writer
	// Log receives the loopback server's log lines (nil: discarded).
	Log io.Writer
	// TLS runs the CompareTCP baseline over crypto/tls streams with this
	// configuration (tls.go); the iwarp-go side gets conn.WithTLS with the
	// same one in Options. It must serve as client and server.
	TLS *tls.Config
	// Options are connection options added to ConnOptions' (a logger,
	// say), for the client's connections and a loopback server's.
	Options []conn.Option

	lastRun bool // the run in progress is the last one
}

// ConnOptions are the connection options of bench peers, on both sides:
// CRC as asked (a server without it follows the client), peer-to-peer
// with a Write RTR (the library's default), and room for 128 Reads in
// flight, as perftest asks of siw for its Read test.
func ConnOptions(crc bool) []conn.Option {
	mode := conn.CRCOff
	if crc {
		mode = conn.CRCRequired
	}
	return []conn.Option{conn.WithCRC(mode), conn.WithIRDORD(128, 128)}
}

// MaxQPs bounds Config.QPs.
const MaxQPs = 1024

func (c *Config) qps() int { return max(1, c.QPs) }

// Credits of a Send stream: the receiver keeps twice the window posted
// and returns credits in batches of a quarter of that.
func (c *Config) credits() uint32     { return uint32(2 * c.Window) }
func (c *Config) creditBatch() uint32 { return uint32(max(1, c.Window/2)) }

// warmup is the number of round trips not counted at the start of a
// counted latency phase.
func (c *Config) warmup() int {
	if c.LatTimed {
		return 0
	}
	return min(100, c.LatIters/10)
}

// warmingUp reports whether round trip i, started at t of a phase started
// at start, is still part of the warm-up: the first warmup() round trips
// of a counted phase; of a timed one, the first 100 unless they take more
// than a tenth of the time.
func (c *Config) warmingUp(i int64, start, t time.Time) bool {
	if c.LatTimed {
		return i < 100 && t.Sub(start) < c.Duration/10
	}
	return i < int64(c.warmup())
}

func (c *Config) hasLatency() bool { return c.LatTimed || c.LatIters > 0 }

// latStopper says when the latency phase has its last round trip,
// counting the warm-up.
func (c *Config) latStopper(start time.Time) stopper {
	if c.LatTimed {
		return stopper{deadline: start.Add(c.Duration)}
	}
	return stopper{iters: int64(c.LatIters + c.warmup())}
}

func (c *Config) latSamplesHint() int {
	if c.LatTimed {
		return 1 << 16
	}
	return c.LatIters
}

// latDuration is the latency phase's length for its progress line.
func (c *Config) latDuration() time.Duration {
	if c.LatTimed {
		return c.Duration
	}
	return 0
}

// stopper says when a timed or counted run posts its last message.
type stopper struct {
	iters    int64
	deadline time.Time
}

func newStopper(cfg *Config, start time.Time) stopper {
	if cfg.Duration > 0 {
		return stopper{deadline: start.Add(cfg.Duration)}
	}
	return stopper{iters: int64(cfg.Iters)}
}

// last reports whether message n (from 0) is the last one.
func (s stopper) last(n int64) bool {
	if s.iters > 0 {
		return n >= s.iters-1
	}
	return !time.Now().Before(s.deadline)
}
