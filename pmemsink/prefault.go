package pmemsink

import "runtime"

// prefault faults the whole mapping in if the region is at most limit
// bytes, and reports whether it did. It reads one byte of every page,
// contained like every access to the mapping: on tmpfs that maps each page
// writable, on a disk file it reads the file into the page cache without
// dirtying it. On DAX a read maps the zero page over blocks not yet
// written, so there the system pre-faults writable (Linux 5.14's
// MADV_POPULATE_WRITE), falling back to the read. On tmpfs the read from
// Go measured best: a cold 1 MiB put took 0.6–0.9 ms after it, 3–6 ms
// after MADV_POPULATE_WRITE or _READ, 4–5 ms with neither
// (docs/performance.md, "The cold region"). A failure is no error of
// Open's: the first touch of each page faults then, as without it.
func (s *Sink) prefault(limit int64) bool {
	if limit <= 0 || s.info.Size > limit {
		return false
	}
	if s.populateWrite && sysPopulateWrite(s.mapped) == nil {
		return true
	}
	return s.guard(func() error {
		touchPages(s.mapped, int(s.page))
		return nil
	}) == nil
}

// touchPages reads one byte of every page of b. A read never changes the
// file, where a write of the same byte could undo a concurrent writer's
// (another process mapping the file).
func touchPages(b []byte, page int) {
	var x byte
	for i := 0; i < len(b); i += page {
		x += b[i]
	}
	runtime.KeepAlive(x) // the loads are the point
}
