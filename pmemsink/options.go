package pmemsink

import (
	"os"
	"runtime"
	"time"
)

// Option configures Open.
type Option func(*config)

type config struct {
	mode         Mode
	perm         os.FileMode
	noCreate     bool
	trackerCap   int
	closeTimeout time.Duration
	persistConc  int
	prefault     int64 // pre-fault regions of at most this many bytes

	// Test overrides; none is reachable from a command line, and a sink
	// opened with one never reports itself durable.
	shadow     Shadow
	shadowMode Mode
	testFlush  string // run the DAX persist path with this instruction on any file
	hooks      *testHooks
}

// testHooks are deliberate defects the crash-simulator tests switch on to
// prove that the simulator catches them. Only this package's tests set them.
type testHooks struct {
	misalignMsync bool // msync from the aligned start for the unrounded length
	dropAtCap     bool // a full dirty set drops the new range instead of widening

	// Defects of the target side of the network path (Registration).
	ackEarly       bool // acknowledge a flush, then persist
	readNoPersist  bool // answer every RDMA Read at once
	flushNoBase    bool // persist a Flush Request's range without the window's offset
	gpspmNoPersist bool // answer a GPSPM request without persisting
}

func defaultConfig() config {
	return config{mode: ModeAuto, perm: 0o600, trackerCap: 64, closeTimeout: 10 * time.Second,
		persistConc: max(2, runtime.GOMAXPROCS(0)), prefault: DefaultPrefaultLimit}
}

// DefaultPrefaultLimit is the largest region Open pre-faults unless told
// otherwise (WithPrefault): 256 MiB.
const DefaultPrefaultLimit = 256 << 20

// WithPrefault sets the largest region Open pre-faults (default
// DefaultPrefaultLimit; 0 or less: none). Pre-faulting touches every page
// of the mapping at Open, so that the first RDMA Write into a page does
// not take the page fault inside the connection's receive path: on the
// 2-core VM of docs/performance.md a 1 MiB put into a fresh 64 MiB tmpfs
// region took 4–9 ms without it and 0.6 ms with it, as much as into a
// touched region. The cost moves to Open, in proportion to the region:
// there 64 MiB took 0.22–0.29 s instead of 0.01–0.04 s and 1 GiB 4.5 s
// (the VM makes a first touch dear; bare metal is far cheaper). It also
// costs page tables (2 MiB per GiB of 4 KiB pages) and, per backing:
// on tmpfs nothing more (Open allocates the pages anyway); on a disk file
// it reads the file into the page cache, without dirtying it; on a DAX
// file system the blocks of a fresh file are zeroed at Open instead of at
// their first write. A region larger than the limit is not pre-faulted at
// all: touching a 1 TiB sparse file on DAX at Open would take minutes and
// gigabytes of page tables for pages that may never be written.
// Info.Prefaulted says whether Open did it.
func WithPrefault(limit int64) Option { return func(c *config) { c.prefault = limit } }

// WithPersistConcurrency bounds how many persists the connections served
// by the sink's registrations (Register) run at once (default GOMAXPROCS,
// at least 2; minimum 1). The persists of one connection always run one
// after the other.
func WithPersistConcurrency(n int) Option {
	return func(c *config) { c.persistConc = max(n, 1) }
}

// WithMode requests a mode; Open verifies it. ModeDAX fails unless the path
// is a device-DAX character device or a MAP_SYNC mapping of it succeeds
// (and the CPU has a cache-line write-back instruction). ModeMsync runs
// anywhere but on device DAX (where msync does nothing); on tmpfs it runs
// and reports itself not durable. ModeVolatile never persists.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithPerm sets the permissions of a file Open creates (default 0600).
func WithPerm(perm os.FileMode) Option { return func(c *config) { c.perm = perm } }

// WithoutCreate makes Open fail if the file does not exist.
func WithoutCreate() Option { return func(c *config) { c.noCreate = true } }

// WithTrackerCapacity sets how many disjoint dirty ranges each Tracker
// holds before it widens ranges to stay within that bound (default 64,
// minimum 2). Memory per tracker is 32 bytes per range.
func WithTrackerCapacity(n int) Option {
	return func(c *config) { c.trackerCap = max(n, 2) }
}

// WithCloseTimeout bounds how long Close waits for attached trackers to
// detach after asking them to stop (default 10 s).
func WithCloseTimeout(d time.Duration) Option { return func(c *config) { c.closeTimeout = d } }

// Shadow stands in for the persistence hardware in crash simulations: a
// sink opened WithShadow maps its file as usual but, instead of msync or
// cache-line write-backs, tells the shadow which region bytes each persist
// covers. Package crashsim provides one that keeps a durable image.
// Offsets are region offsets.
type Shadow interface {
	// Msync models msync(MS_SYNC) of [start, start+length): EINVAL unless
	// start is page-aligned; whole pages are covered.
	Msync(start, length uint64) error
	// WriteBack models a cache-line write-back (CLWB) of the line holding
	// region byte off.
	WriteBack(off uint64)
	// Fence models SFENCE: lines written back before it are durable after
	// it.
	Fence()
}

// WithShadow is for tests: Persist reports to sh as a sink in mode
// emulate (ModeMsync or ModeDAX) would persist, with the same span
// arithmetic. The sink reports Backing "simulated" and is never durable.
func WithShadow(sh Shadow, emulate Mode) Option {
	return func(c *config) { c.shadow, c.shadowMode = sh, emulate }
}
