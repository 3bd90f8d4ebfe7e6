#include "textflag.h"

// ZERO clears V0-V17, and so Z0-Z17: writing a V register zeroes the rest of its Z.
#define ZERO \
	VEOR V0.B16, V0.B16, V0.B16; \
	VEOR V1.B16, V1.B16, V1.B16; \
	VEOR V2.B16, V2.B16, V2.B16; \
	VEOR V3.B16, V3.B16, V3.B16; \
	VEOR V4.B16, V4.B16, V4.B16; \
	VEOR V5.B16, V5.B16, V5.B16; \
	VEOR V6.B16, V6.B16, V6.B16; \
	VEOR V7.B16, V7.B16, V7.B16; \
	VEOR V8.B16, V8.B16, V8.B16; \
	VEOR V9.B16, V9.B16, V9.B16; \
	VEOR V10.B16, V10.B16, V10.B16; \
	VEOR V11.B16, V11.B16, V11.B16; \
	VEOR V12.B16, V12.B16, V12.B16; \
	VEOR V13.B16, V13.B16, V13.B16; \
	VEOR V14.B16, V14.B16, V14.B16; \
	VEOR V15.B16, V15.B16, V15.B16; \
	VEOR V16.B16, V16.B16, V16.B16; \
	VEOR V17.B16, V17.B16, V17.B16

// func fmaNEON(n int64)
// n iterations of 16 independent 4-lane single-precision FMAs: 128 FLOPs each. Sixteen
// accumulators cover four FMA pipes of four cycles' latency (Neoverse V1); two-pipe
// cores (Neoverse N1, Cortex-A72) need eight.
TEXT ·fmaNEON(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	ZERO
loop:
	VFMLA V16.S4, V17.S4, V0.S4
	VFMLA V16.S4, V17.S4, V1.S4
	VFMLA V16.S4, V17.S4, V2.S4
	VFMLA V16.S4, V17.S4, V3.S4
	VFMLA V16.S4, V17.S4, V4.S4
	VFMLA V16.S4, V17.S4, V5.S4
	VFMLA V16.S4, V17.S4, V6.S4
	VFMLA V16.S4, V17.S4, V7.S4
	VFMLA V16.S4, V17.S4, V8.S4
	VFMLA V16.S4, V17.S4, V9.S4
	VFMLA V16.S4, V17.S4, V10.S4
	VFMLA V16.S4, V17.S4, V11.S4
	VFMLA V16.S4, V17.S4, V12.S4
	VFMLA V16.S4, V17.S4, V13.S4
	VFMLA V16.S4, V17.S4, V14.S4
	VFMLA V16.S4, V17.S4, V15.S4
	SUBS $1, R0, R0
	BNE loop
	RET

// func fmaSVE(n int64)
// n iterations of 16 independent FMAs on whole SVE vectors of single-precision lanes: 32
// FLOPs per lane each. The Go assembler has no SVE, so the instructions are encoded here
// (checked against GNU as); p0 governs every lane.
TEXT ·fmaSVE(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	ZERO
	WORD $0x2598e3e0 // ptrue p0.s
loopsve:
	WORD $0x65b10200 // fmla z0.s, p0/m, z16.s, z17.s
	WORD $0x65b10201 // fmla z1.s, p0/m, z16.s, z17.s
	WORD $0x65b10202 // fmla z2.s, p0/m, z16.s, z17.s
	WORD $0x65b10203 // fmla z3.s, p0/m, z16.s, z17.s
	WORD $0x65b10204 // fmla z4.s, p0/m, z16.s, z17.s
	WORD $0x65b10205 // fmla z5.s, p0/m, z16.s, z17.s
	WORD $0x65b10206 // fmla z6.s, p0/m, z16.s, z17.s
	WORD $0x65b10207 // fmla z7.s, p0/m, z16.s, z17.s
	WORD $0x65b10208 // fmla z8.s, p0/m, z16.s, z17.s
	WORD $0x65b10209 // fmla z9.s, p0/m, z16.s, z17.s
	WORD $0x65b1020a // fmla z10.s, p0/m, z16.s, z17.s
	WORD $0x65b1020b // fmla z11.s, p0/m, z16.s, z17.s
	WORD $0x65b1020c // fmla z12.s, p0/m, z16.s, z17.s
	WORD $0x65b1020d // fmla z13.s, p0/m, z16.s, z17.s
	WORD $0x65b1020e // fmla z14.s, p0/m, z16.s, z17.s
	WORD $0x65b1020f // fmla z15.s, p0/m, z16.s, z17.s
	SUBS $1, R0, R0
	BNE loopsve
	RET

// func dotSDOT(n int64)
// n iterations of 16 independent SDOTs of 16 byte pairs into V0-V15: 512 operations. The
// Go assembler has no SDOT: sdot vD.4s, v16.16b, v17.16b is 0x4e919600|D (llvm-mc).
TEXT ·dotSDOT(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	ZERO
loopsdot:
	WORD $0x4e919600
	WORD $0x4e919601
	WORD $0x4e919602
	WORD $0x4e919603
	WORD $0x4e919604
	WORD $0x4e919605
	WORD $0x4e919606
	WORD $0x4e919607
	WORD $0x4e919608
	WORD $0x4e919609
	WORD $0x4e91960a
	WORD $0x4e91960b
	WORD $0x4e91960c
	WORD $0x4e91960d
	WORD $0x4e91960e
	WORD $0x4e91960f
	SUBS $1, R0, R0
	BNE loopsdot
	RET

// func dotSMULL(n int64)
// n iterations of two SMULL and two SMULL2 (8 byte products each), each pairwise added
// into one of V0-V3 by SADALP, ggml's sequence without the dot product: 64 operations. Encoded as
// llvm-mc does: smull v18.8h, v16.8b, v17.8b is 0x0e31c212, smull2 v19.8h, v16.16b,
// v17.16b 0x4e31c213, sadalp vD.4s, v18.8h 0x4e606a40|D, and from v19 0x4e606a60|D.
TEXT ·dotSMULL(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	ZERO
loopsmull:
	WORD $0x0e31c212
	WORD $0x4e31c213
	WORD $0x4e606a40
	WORD $0x4e606a61
	WORD $0x0e31c212
	WORD $0x4e31c213
	WORD $0x4e606a42
	WORD $0x4e606a63
	SUBS $1, R0, R0
	BNE loopsmull
	RET

// func dotSMMLA(n int64)
// n iterations of 16 independent SMMLAs into V0-V15, each a 2×8 by 8×2 byte matrix
// product (32 multiply-adds): 1024 operations. smmla vD.4s, v16.16b, v17.16b is
// 0x4e91a600|D (llvm-mc).
TEXT ·dotSMMLA(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	ZERO
loopsmmla:
	WORD $0x4e91a600
	WORD $0x4e91a601
	WORD $0x4e91a602
	WORD $0x4e91a603
	WORD $0x4e91a604
	WORD $0x4e91a605
	WORD $0x4e91a606
	WORD $0x4e91a607
	WORD $0x4e91a608
	WORD $0x4e91a609
	WORD $0x4e91a60a
	WORD $0x4e91a60b
	WORD $0x4e91a60c
	WORD $0x4e91a60d
	WORD $0x4e91a60e
	WORD $0x4e91a60f
	SUBS $1, R0, R0
	BNE loopsmmla
	RET
