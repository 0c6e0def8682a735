package perftest

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/iwarp-go/iwarp-go/conn"
)

// DefaultPort is perftest's port (-p): the comm connection and the test
// connections all use it.
const DefaultPort = 18515

// Config is a run's settings, named after perftest's options. As with
// perftest, both sides must be given the same test, size, iterations,
// queue pairs and -a.
type Config struct {
	Test Test
	// Size is the message size (-s); 0 means perftest's default: 65536
	// bytes for bandwidth tests, 2 for latency tests.
	Size int
	// Iters is the number of messages per queue pair (-n); 0 means
	// perftest's default: 5000 for write_bw, 1000 otherwise. At least 5.
	Iters int
	// Duration runs for this long instead (-D, whole seconds).
	Duration time.Duration
	// AllSizes measures every power of two from 2 bytes to 8 MiB (-a).
	AllSizes bool
	// QPs is the number of test connections (-q, bandwidth tests only);
	// 0 means 1.
	QPs int
	// TxDepth is the number of work requests in flight per queue pair
	// (-t); 0 means perftest's default: 128 for bandwidth tests, 1 for
	// latency tests.
	TxDepth int
	// ReportGbits reports bandwidth in Gb/s instead of MB/s
	// (--report_gbits).
	ReportGbits bool
	// Atomic is the operation of AtomicBW and AtomicLat (-A); their size
	// is always 8 bytes.
	Atomic AtomicType
	// ConnOptions are added to every connection's setup options (the
	// MPA CRC mode, say).
	ConnOptions []conn.Option
	// Output receives perftest's text: the test information, both sides'
	// queue pair lines and the result table. nil prints nothing.
	Output io.Writer
}

// MinIters is perftest's smallest -n.
const MinIters = 5

// settings are a Config with perftest's defaults and dependencies
// applied (init_perftest_params, force_dependecies).
type settings struct {
	Config
	size     int // of the allocation: MaxSize with -a
	sizes    []int
	txDepth  int
	rxDepth  int // Send tests: receives posted; credits every rxDepth/3
	cqMod    int
	noPeak   bool
	outReads int
	margin   time.Duration // -D: the warm-up and cool-down around the sampling window
}

// Defaults of perftest (perftest_parameters.h).
const (
	defSizeBW    = 65536
	defSizeLat   = 2
	defItersWB   = 5000
	defIters     = 1000
	defTxBW      = 128
	defTxLat     = 1
	defRxSend    = 512
	defCQMod     = 100
	maxTxDepth   = 15000
	cqModLimit   = 8192 // MSG_SIZE_CQ_MOD_LIMIT
	noPeakIters  = 20000
	defOutReads  = 128 // siw's max_qp_rd_atom, and iwarp-go's largest IRD
	maxRecvDepth = 1 << 16
)

func (c *Config) settings(role Role) (*settings, error) {
	s := &settings{Config: *c}
	bad := func(format string, a ...any) (*settings, error) {
		return nil, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if !s.Test.valid() {
		return bad("test %v", s.Test)
	}
	lat := s.Test.Latency()
	if s.Test.verb() == verbAtomic {
		// perftest's atomic tests move 8 bytes, whatever -s says.
		if s.AllSizes {
			return bad("-a with an atomic test (its size is %d bytes)", atomicSize)
		}
		s.Size = atomicSize
	}
	if s.Size == 0 {
		s.Size = defSizeBW
		if lat {
			s.Size = defSizeLat
		}
	}
	if s.Size < 1 || s.Size > MaxMessageSize {
		return bad("message size %d (1 to %d)", s.Size, MaxMessageSize)
	}
	if s.Iters == 0 {
		s.Iters = defIters
		if s.Test == WriteBW {
			s.Iters = defItersWB
		}
	}
	if s.Iters < MinIters || s.Iters > 100000000 {
		return bad("%d iterations (%d to 100000000)", s.Iters, MinIters)
	}
	if s.QPs == 0 {
		s.QPs = 1
	}
	if s.QPs < 1 || s.QPs > MaxQPs || (lat && s.QPs > 1) {
		return bad("%d queue pairs (1 to %d; latency tests use one)", s.QPs, MaxQPs)
	}
	if s.Duration < 0 || s.Duration%time.Second != 0 {
		return bad("duration %v (whole seconds, as perftest's -D)", s.Duration)
	}
	if s.Duration > 0 && s.AllSizes {
		return bad("duration mode does not run on all sizes")
	}
	s.txDepth = s.TxDepth
	if s.txDepth == 0 {
		s.txDepth = defTxBW
		if lat {
			s.txDepth = defTxLat
		}
	}
	if s.txDepth < 1 || s.txDepth > maxTxDepth {
		return bad("TX depth %d (1 to %d)", s.txDepth, maxTxDepth)
	}
	s.rxDepth = 1
	if s.Test.verb() == verbSend {
		s.rxDepth = defRxSend
	}
	s.cqMod = defCQMod
	iterMode := s.Duration == 0
	if iterMode {
		s.txDepth = min(s.txDepth, s.Iters)
		if s.Test.verb() == verbSend {
			s.rxDepth = min(s.rxDepth, s.Iters)
		}
	}
	if s.Size > cqModLimit && !s.AllSizes {
		s.cqMod = 1
	}
	s.cqMod = min(s.cqMod, s.txDepth)
	s.outReads = 1
	if s.Test.verb().oneSidedRead() {
		s.outReads = defOutReads
	}
	// perftest's "WA for a bug when rx_depth is odd in SEND".
	if s.Test.verb() == verbSend && s.rxDepth%2 == 1 && !s.AllSizes {
		s.rxDepth++
	}
	if !iterMode {
		s.noPeak = true
		secs := int(s.Duration / time.Second)
		s.margin = time.Duration(secs/4) * time.Second
		if !(s.Duration > 2*s.margin) {
			return bad("duration %v must exceed twice its margin", s.Duration)
		}
	}
	if (iterMode && s.Iters > noPeakIters && !lat) || (s.Test == SendBW && role == Server) {
		s.noPeak = true
	}
	s.size = s.Size
	if s.AllSizes {
		s.size = MaxSize
	}
	s.sizes = sizesOf(s.Size, s.AllSizes)
	return s, nil
}

// params are the Protocol's view of the settings.
func (s *settings) params(role Role) Params {
	return Params{Test: s.Test, Role: role, QPs: s.QPs, Size: s.Size, AllSizes: s.AllSizes,
		CycleBuffer: os.Getpagesize(), CacheLineSize: cacheLineSize, MTU: mtu4096}
}

// cacheLineSize is what this side reports; perftest reads it from sysfs
// (64 on x86-64 and most arm64 parts).
const cacheLineSize = 64

// header is the test information block of this side.
func (s *settings) header(role Role, mtu int) *header {
	return &header{test: s.Test, role: role, qps: s.QPs, txDepth: s.txDepth, rxDepth: s.rxDepth, cqMod: s.cqMod,
		mtu: mtu, outReads: s.outReads, duration: s.Duration > 0, reportGbits: s.ReportGbits}
}

// atomicOp is the work request of the atomic tests, and how errors name it.
func (s *settings) atomicOp() (conn.Op, string) {
	if s.Atomic == CmpAndSwap {
		return conn.OpCmpSwap, "a CmpSwap"
	}
	return conn.OpFetchAdd, "a FetchAdd"
}

// atomicArgs are the operands of the atomic tests: FetchAdd adds 1,
// CmpSwap swaps 0 for 0 (the compare fails once the word is not 0, and
// the operation is the same work either way).
func (s *settings) atomicArgs() conn.AtomicArgs {
	if s.Test.verb() != verbAtomic {
		return conn.AtomicArgs{}
	}
	if s.Atomic == CmpAndSwap {
		return conn.CmpSwap(0, 0)
	}
	return conn.FetchAdd(1)
}
