//go:build !amd64 && !arm64

package pmemsink

// cpuFlushers: no cache-line write-back from user space on this
// architecture, so DAX is unsupported.
func cpuFlushers() []flusher { return nil }
