package pmemsink

import (
	"errors"
	"fmt"
)

// facts are what Open learned about the file before mapping it.
type facts struct {
	devDAX   bool   // a device-DAX character device
	backing  string // "device-dax", "file", "tmpfs", "ramfs", "hugetlbfs"
	volatile bool   // the file system is memory
	flushers []flusher
}

// choice is how the sink will be mapped and persisted.
type choice struct {
	mode    Mode
	kind    persistKind
	durable bool
	fl      flusher
	mapSync bool // the probe's MAP_SYNC mapping is the sink's mapping
	backing string
	note    string
}

// choose decides the mode. probe tries a MAP_SHARED_VALIDATE|MAP_SYNC
// mapping and returns nil if it succeeded (the caller then keeps it).
// A requested mode that the file cannot have is an error that names why.
func choose(req Mode, f facts, probe func() error) (choice, error) {
	c := choice{mode: req, backing: f.backing}
	var best flusher
	if len(f.flushers) > 0 {
		best = f.flushers[0]
	}
	noFlush := fmt.Errorf("%w: no cache-line write-back instruction usable from user space on this CPU (amd64 CLWB/CLFLUSHOPT/CLFLUSH, arm64 DC CVAP)", ErrUnsupported)
	useDAX := func(durable bool) choice {
		c.mode, c.kind, c.durable, c.fl = ModeDAX, persistLines, durable, best
		return c
	}
	if req == ModeVolatile {
		c.kind, c.note = persistNone, "volatile mode requested: persist does nothing"
		return c, nil
	}
	switch {
	case f.devDAX:
		switch req {
		case ModeMsync:
			return c, errors.New("mode msync: msync has no effect on device DAX; use dax or auto")
		}
		if len(f.flushers) == 0 {
			return c, fmt.Errorf("device DAX: %w", noFlush)
		}
		return useDAX(true), nil
	case f.volatile:
		switch req {
		case ModeDAX:
			err := probe()
			if err == nil {
				return c, fmt.Errorf("mode dax: MAP_SYNC succeeded on %s, which is memory; refusing to call it persistent", f.backing)
			}
			return c, fmt.Errorf("mode dax: mmap with MAP_SYNC failed: %w (%s is not DAX; it is memory)", err, f.backing)
		case ModeMsync:
			c.mode, c.kind = ModeMsync, persistMsync
			c.note = "msync runs, but " + f.backing + " is memory: nothing survives power loss"
			return c, nil
		}
		c.mode, c.kind = ModeVolatile, persistNone
		c.note = f.backing + " is memory: nothing survives power loss"
		return c, nil
	}
	switch req {
	case ModeMsync:
		c.kind, c.durable = persistMsync, true
		return c, nil
	case ModeDAX:
		if len(f.flushers) == 0 {
			return c, fmt.Errorf("mode dax: %w", noFlush)
		}
		if err := probe(); err != nil {
			return c, fmt.Errorf("mode dax: mmap with MAP_SYNC failed: %w (the file system is not mounted with DAX, or the file is not DAX)", err)
		}
		c.mapSync, c.backing = true, "fsdax"
		return useDAX(true), nil
	}
	// Auto.
	if len(f.flushers) > 0 {
		err := probe()
		if err == nil {
			c.mapSync, c.backing = true, "fsdax"
			return useDAX(true), nil
		}
		c.note = "MAP_SYNC: " + err.Error()
	} else {
		c.note = "no cache-line write-back instruction: DAX not used"
	}
	c.mode, c.kind, c.durable = ModeMsync, persistMsync, true
	return c, nil
}

// testChoice is the choice for a test override: the shadow, or the DAX
// persist path run with a named instruction on a file that is not DAX.
// Neither is ever durable.
func testChoice(cfg *config, f facts) (choice, bool, error) {
	switch {
	case cfg.shadow != nil:
		c := choice{mode: cfg.shadowMode, backing: "simulated", note: "test shadow of " + f.backing}
		c.kind = persistShadowMsync
		if cfg.shadowMode == ModeDAX {
			c.kind = persistShadowLines
			c.fl.line = 64
		}
		return c, true, nil
	case cfg.testFlush != "":
		for _, fl := range f.flushers {
			if fl.name == cfg.testFlush {
				return choice{mode: ModeDAX, kind: persistLines, fl: fl, backing: "simulated",
					note: "test: " + fl.name + " on " + f.backing}, true, nil
			}
		}
		return choice{}, true, fmt.Errorf("%w: this CPU has no %s", ErrUnsupported, cfg.testFlush)
	}
	return choice{}, false, nil
}
