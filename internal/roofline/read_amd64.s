#include "textflag.h"

// func readAVX2(p *uint64, n int64)
// Reads n bytes from p, a multiple of 256, in 32-byte loads folded into four
// accumulators: the loads are the work, as when a decode matmul streams its weights.
TEXT ·readAVX2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $8, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
loop:
	VPXOR 0(SI), Y0, Y0
	VPXOR 32(SI), Y1, Y1
	VPXOR 64(SI), Y2, Y2
	VPXOR 96(SI), Y3, Y3
	VPXOR 128(SI), Y0, Y0
	VPXOR 160(SI), Y1, Y1
	VPXOR 192(SI), Y2, Y2
	VPXOR 224(SI), Y3, Y3
	ADDQ $256, SI
	DECQ CX
	JNZ loop
	VZEROUPPER
	RET

// func readAVX512(p *uint64, n int64)
// As readAVX2 in 64-byte loads: CPUs with two 512-bit load ports read their L1 twice as
// fast with them, and ggml's kernels use them there.
TEXT ·readAVX512(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $8, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
loop512:
	VPXORD 0(SI), Z0, Z0
	VPXORD 64(SI), Z1, Z1
	VPXORD 128(SI), Z2, Z2
	VPXORD 192(SI), Z3, Z3
	ADDQ $256, SI
	DECQ CX
	JNZ loop512
	VZEROUPPER
	RET
