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

// The stream loops read n bytes from p, a multiple of 256, as four streams a quarter of n
// apart, for memory's roof: four keep more reads in flight than one, each followed by
// the core's prefetchers (on the EPYC here 2 threads read memory at 49 GB/s so, at 32
// with one stream each, below the 37 GB/s a decode matmul reached). In a cache they read
// slower (L1: 4 KiB apart, the streams' loads contend for the same sets).

// func streamAVX2(p *uint64, n int64)
TEXT ·streamAVX2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $2, CX
	LEAQ (SI)(CX*1), R8
	LEAQ (R8)(CX*1), R9
	LEAQ (R9)(CX*1), R10
	SHRQ $6, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
loops:
	VPXOR 0(SI), Y0, Y0
	VPXOR 32(SI), Y0, Y0
	VPXOR 0(R8), Y1, Y1
	VPXOR 32(R8), Y1, Y1
	VPXOR 0(R9), Y2, Y2
	VPXOR 32(R9), Y2, Y2
	VPXOR 0(R10), Y3, Y3
	VPXOR 32(R10), Y3, Y3
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ CX
	JNZ loops
	VZEROUPPER
	RET

// func streamAVX512(p *uint64, n int64)
// As streamAVX2 in 64-byte loads.
TEXT ·streamAVX512(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $2, CX
	LEAQ (SI)(CX*1), R8
	LEAQ (R8)(CX*1), R9
	LEAQ (R9)(CX*1), R10
	SHRQ $6, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
loops512:
	VPXORD 0(SI), Z0, Z0
	VPXORD 0(R8), Z1, Z1
	VPXORD 0(R9), Z2, Z2
	VPXORD 0(R10), Z3, Z3
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ CX
	JNZ loops512
	VZEROUPPER
	RET
