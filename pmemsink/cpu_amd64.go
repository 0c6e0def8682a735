package pmemsink

// Implemented in cpu_amd64.s.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func clwbLines(p, n, line uintptr)
func clflushoptLines(p, n, line uintptr)
func clflushLines(p, n, line uintptr)
func sfence()

// cpuFlushers returns the cache-line write-back instructions this CPU has,
// best first, as libpmem orders them: CLWB (writes back, keeps the line),
// CLFLUSHOPT (evicts, weakly ordered), CLFLUSH (evicts, serialising).
// golang.org/x/sys/cpu does not report CLWB or CLFLUSHOPT, so CPUID is
// read here: leaf 7 sub-leaf 0 EBX bit 24 (CLWB) and bit 23 (CLFLUSHOPT),
// leaf 1 EDX bit 19 (CLFSH) with the line size in EBX bits 15–8 (× 8).
func cpuFlushers() []flusher {
	maxLeaf, _, _, _ := cpuid(0, 0)
	_, b1, _, d1 := cpuid(1, 0)
	line := uintptr((b1>>8)&0xff) * 8
	if line == 0 {
		line = 64
	}
	var out []flusher
	if maxLeaf >= 7 {
		_, b7, _, _ := cpuid(7, 0)
		if b7&(1<<24) != 0 {
			out = append(out, flusher{name: "clwb", lines: clwbLines, fence: sfence, line: line})
		}
		if b7&(1<<23) != 0 {
			out = append(out, flusher{name: "clflushopt", lines: clflushoptLines, fence: sfence, line: line})
		}
	}
	if d1&(1<<19) != 0 {
		out = append(out, flusher{name: "clflush", lines: clflushLines, fence: sfence, line: line})
	}
	return out
}
