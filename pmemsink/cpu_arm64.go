package pmemsink

import "golang.org/x/sys/cpu"

// Implemented in cpu_arm64.s.
func dcCvapLines(p, n, line uintptr)
func dsbSY()
func ctrEL0() uint64

// cpuFlushers returns DC CVAP with a DSB SY when the CPU has DCPoP
// (ARMv8.2; HWCAP_DCPOP on Linux). Without it there is no architectural
// way to reach the point of persistence from user space and DAX is
// reported unsupported. The line size is CTR_EL0.DminLine (4 << DminLine
// bytes), which Linux lets user space read.
func cpuFlushers() []flusher {
	if !cpu.ARM64.HasDCPOP {
		return nil
	}
	line := uintptr(4) << ((ctrEL0() >> 16) & 0xf)
	return []flusher{{name: "dc cvap", lines: dcCvapLines, fence: dsbSY, line: line}}
}
