#include "textflag.h"

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// The line loops take a line-aligned address p and a length n that is a
// multiple of line; n = 0 flushes nothing.

// func clwbLines(p, n, line uintptr)
TEXT ·clwbLines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	MOVQ line+16(FP), DX
	TESTQ CX, CX
	JZ clwbdone
clwbloop:
	CLWB (AX)
	ADDQ DX, AX
	SUBQ DX, CX
	JA clwbloop
clwbdone:
	RET

// func clflushoptLines(p, n, line uintptr)
TEXT ·clflushoptLines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	MOVQ line+16(FP), DX
	TESTQ CX, CX
	JZ optdone
optloop:
	CLFLUSHOPT (AX)
	ADDQ DX, AX
	SUBQ DX, CX
	JA optloop
optdone:
	RET

// func clflushLines(p, n, line uintptr)
TEXT ·clflushLines(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	MOVQ line+16(FP), DX
	TESTQ CX, CX
	JZ fldone
flloop:
	CLFLUSH (AX)
	ADDQ DX, AX
	SUBQ DX, CX
	JA flloop
fldone:
	RET

// func sfence()
TEXT ·sfence(SB), NOSPLIT, $0-0
	SFENCE
	RET
