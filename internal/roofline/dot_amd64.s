#include "textflag.h"

// The int8 dot-product loops: n iterations of independent unsigned×signed byte
// multiply-adds into int32 lanes, as ggml's quantised matmuls run them. Each reports its
// operations per iteration in kernels_amd64.go, two per multiply-add.

// func dotVNNI512(n int64)
// 10 VPDPBUSD on 64 byte pairs each: 1280 operations.
TEXT ·dotVNNI512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
loopvnni512:
	VPDPBUSD Z10, Z11, Z0
	VPDPBUSD Z10, Z11, Z1
	VPDPBUSD Z10, Z11, Z2
	VPDPBUSD Z10, Z11, Z3
	VPDPBUSD Z10, Z11, Z4
	VPDPBUSD Z10, Z11, Z5
	VPDPBUSD Z10, Z11, Z6
	VPDPBUSD Z10, Z11, Z7
	VPDPBUSD Z10, Z11, Z8
	VPDPBUSD Z10, Z11, Z9
	DECQ CX
	JNZ loopvnni512
	VZEROUPPER
	RET

// VNNI256 is AVX-VNNI's VEX-encoded VPDPBUSD of Y6 and Y7 into Y(r), which the Go
// assembler does not know (it encodes the AVX512-VL form): c4 e2 4d 50 /r, and c4 62
// for Y8-Y15 (llvm-mc's "{vex} vpdpbusd").
#define VNNI256(r) BYTE $0xc4; BYTE $0xe2; BYTE $0x4d; BYTE $0x50; BYTE $(0xc7|(r<<3))
#define VNNI256H(r) BYTE $0xc4; BYTE $0x62; BYTE $0x4d; BYTE $0x50; BYTE $(0xc7|(r<<3))

// func dotVNNI256(n int64)
// 10 VPDPBUSD on 32 byte pairs each: 640 operations.
TEXT ·dotVNNI256(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
loopvnni256:
	VNNI256(0)
	VNNI256(1)
	VNNI256(2)
	VNNI256(3)
	VNNI256(4)
	VNNI256(5)
	VNNI256H(0)
	VNNI256H(1)
	VNNI256H(2)
	VNNI256H(3)
	DECQ CX
	JNZ loopvnni256
	VZEROUPPER
	RET

// func dotBW512(n int64)
// 4 chains of VPMADDUBSW, VPMADDWD by a constant and VPADDD, ggml's sequence without VNNI, on
// 64 byte pairs each: 512 operations.
TEXT ·dotBW512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPTERNLOGD $0xff, Z12, Z12, Z12
loopbw512:
	VPMADDUBSW Z10, Z11, Z4
	VPMADDUBSW Z10, Z11, Z5
	VPMADDUBSW Z10, Z11, Z6
	VPMADDUBSW Z10, Z11, Z7
	VPMADDWD Z12, Z4, Z4
	VPMADDWD Z12, Z5, Z5
	VPMADDWD Z12, Z6, Z6
	VPMADDWD Z12, Z7, Z7
	VPADDD Z4, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPADDD Z6, Z2, Z2
	VPADDD Z7, Z3, Z3
	DECQ CX
	JNZ loopbw512
	VZEROUPPER
	RET

// func dotAVX2(n int64)
// As dotBW512 on 32 byte pairs each: 256 operations.
TEXT ·dotAVX2(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPCMPEQD Y12, Y12, Y12
loopavx2:
	VPMADDUBSW Y10, Y11, Y4
	VPMADDUBSW Y10, Y11, Y5
	VPMADDUBSW Y10, Y11, Y6
	VPMADDUBSW Y10, Y11, Y7
	VPMADDWD Y12, Y4, Y4
	VPMADDWD Y12, Y5, Y5
	VPMADDWD Y12, Y6, Y6
	VPMADDWD Y12, Y7, Y7
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	DECQ CX
	JNZ loopavx2
	VZEROUPPER
	RET

// DPBF16(r) is VDPBF16PS of Z10 and Z11 into Z(r), r < 8, which the Go assembler does
// not know (llvm-mc's encoding); DPBF16H(r) into Z(8+r).
#define DPBF16(r) BYTE $0x62; BYTE $0xd2; BYTE $0x2e; BYTE $0x48; BYTE $0x52; BYTE $(0xc3|(r<<3))
#define DPBF16H(r) BYTE $0x62; BYTE $0x52; BYTE $0x2e; BYTE $0x48; BYTE $0x52; BYTE $(0xc3|(r<<3))

// func dotBF16(n int64)
// n iterations of 10 independent VDPBF16PS, ggml's bf16 dot product with AVX512-BF16:
// 16 lanes of 2 bf16 multiply-adds each, 640 FLOPs.
TEXT ·dotBF16(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
loopbf16:
	DPBF16(0)
	DPBF16(1)
	DPBF16(2)
	DPBF16(3)
	DPBF16(4)
	DPBF16(5)
	DPBF16(6)
	DPBF16(7)
	DPBF16H(0)
	DPBF16H(1)
	DECQ CX
	JNZ loopbf16
	VZEROUPPER
	RET
