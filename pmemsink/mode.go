package pmemsink

import (
	"fmt"
	"strings"
)

// Mode is how a sink makes placed bytes persistent. It is requested with
// [WithMode] and reported, once detected at Open, by [Info].
type Mode uint8

// Modes.
const (
	// ModeAuto (a request only): detect the best mode the file allows.
	ModeAuto Mode = iota
	// ModeDAX: the mapping is the persistent memory itself (device DAX, or
	// a file on a DAX file system mapped with MAP_SYNC). Persist writes
	// the cache lines back (CLWB, CLFLUSHOPT or CLFLUSH, then SFENCE; DC
	// CVAP then DSB on arm64).
	ModeDAX
	// ModeMsync: the mapping is page cache. Persist is msync(MS_SYNC) of
	// the pages holding the range.
	ModeMsync
	// ModeVolatile: nothing a persist could do survives power loss (tmpfs,
	// ramfs), or the caller asked for no persistence. Persist does no
	// work and the sink never reports itself durable.
	ModeVolatile
)

var modeNames = [...]string{"auto", "dax", "msync", "volatile"}

// String returns the name ParseMode accepts.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses "auto", "dax", "msync" or "volatile".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("pmemsink: unknown mode %q (want auto, dax, msync or volatile)", s)
}

// Info describes an open sink: what it is backed by and what its Persist
// guarantees.
type Info struct {
	Path string
	Size int64
	// Mode is how Persist works (never ModeAuto).
	Mode Mode
	// Durable reports whether a successful Persist puts the bytes where a
	// power loss does not reach them: true only in ModeDAX on real DAX
	// memory and in ModeMsync on a file system that writes to storage.
	// Never true on tmpfs or ramfs, in ModeVolatile, or with a test
	// override.
	Durable bool
	// Backing names the memory: "device-dax", "fsdax", "file", "tmpfs",
	// "ramfs", "hugetlbfs", or "simulated" for a test override.
	Backing string
	// Flush names the persist mechanism: "clwb", "clflushopt", "clflush",
	// "dc cvap", "msync", or "none".
	Flush string
	// Granularity is the unit Persist rounds a range out to: the cache
	// line in ModeDAX, the page in ModeMsync, 1 in ModeVolatile.
	Granularity uint64
	// Note says why this mode was chosen, e.g. the MAP_SYNC probe's error.
	Note string
	// Prefaulted reports whether Open filled the mapping's page tables
	// (WithPrefault): false for a region over the limit, or where the
	// system refused and touching the pages faulted.
	Prefaulted bool
}

// String is a one-line description, e.g.
// "msync on file /data/sink (4096 bytes, durable: page-aligned msync)".
func (i Info) String() string {
	d := "not durable"
	if i.Durable {
		d = "durable"
	}
	s := fmt.Sprintf("%s on %s %s (%d bytes, %s, persist: %s", i.Mode, i.Backing, i.Path, i.Size, d, i.Flush)
	if i.Note != "" {
		s += "; " + i.Note
	}
	return s + ")"
}
