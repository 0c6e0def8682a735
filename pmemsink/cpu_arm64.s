#include "textflag.h"

// func dcCvapLines(p, n, line uintptr)
// DC CVAP (clean to the point of persistence, ARMv8.2 DCPoP) per line.
TEXT ·dcCvapLines(SB), NOSPLIT, $0-24
	MOVD p+0(FP), R0
	MOVD n+8(FP), R1
	MOVD line+16(FP), R2
	CBZ R1, done
loop:
	WORD $0xd50b7c20 // DC CVAP, X0 (SYS #3, C7, C12, #1, X0)
	ADD R2, R0, R0
	SUBS R2, R1, R1
	BHI loop
done:
	RET

// func dsbSY()
TEXT ·dsbSY(SB), NOSPLIT, $0-0
	DSB $15
	RET

// func ctrEL0() uint64
TEXT ·ctrEL0(SB), NOSPLIT, $0-8
	MRS CTR_EL0, R0
	MOVD R0, ret+0(FP)
	RET
