//go:build !unix && !windows

package conn

// tcpMaxSeg reports no MSS where the system has no socket options.
func tcpMaxSeg(uintptr) int { return 0 }
