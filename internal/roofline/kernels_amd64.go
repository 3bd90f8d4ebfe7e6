package roofline

import "golang.org/x/sys/cpu"

func fmaAVX512(n int64)
func fmaAVX2(n int64)
func dotVNNI512(n int64)
func dotVNNI256(n int64)
func dotBW512(n int64)
func dotAVX2(n int64)
func dotBF16(n int64)
func readAVX2(p *uint64, n int64)
func readAVX512(p *uint64, n int64)
func streamAVX2(p *uint64, n int64)
func streamAVX512(p *uint64, n int64)

func fmaKernel() (string, func(int64), float64) {
	switch {
	case cpu.X86.HasAVX512F:
		return "avx512", fmaAVX512, 10 * 16 * 2
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "avx2", fmaAVX2, 10 * 8 * 2
	}
	return "scalar", scalarFMA, 4 * 2
}

// dotKernel is the widest int8 dot product ggml's quantised matmuls use on this CPU
// (ggml-cpu's x86 quants and repack kernels): VPDPBUSD with AVX512-VNNI or AVX-VNNI,
// else VPMADDUBSW and VPMADDWD.
func dotKernel() (string, func(int64), float64) {
	switch {
	case cpu.X86.HasAVX512VNNI:
		return "avx512-vnni", dotVNNI512, 10 * 64 * 2
	case cpu.X86.HasAVXVNNI:
		return "avx-vnni", dotVNNI256, 10 * 32 * 2
	case cpu.X86.HasAVX512BW:
		return "avx512bw", dotBW512, 4 * 64 * 2
	case cpu.X86.HasAVX2:
		return "avx2", dotAVX2, 4 * 32 * 2
	}
	return "scalar", scalarDot, 4 * 2
}

// bf16Kernel is the bf16 dot product ggml's bf16 matmuls use where the CPU has
// AVX512-BF16 (elsewhere they convert to fp32 and run under the FMA roof), and its FLOPs
// per iteration; nil where there is none.
func bf16Kernel() (string, func(int64), float64) {
	if cpu.X86.HasAVX512BF16 {
		return "avx512-bf16", dotBF16, 10 * 16 * 2 * 2
	}
	return "", nil, 0
}

// readKernels' loops take a multiple of 256 bytes: one stream for the caches, four for
// memory.
func readKernels() (cache, memory func([]uint64)) {
	switch {
	case cpu.X86.HasAVX512F:
		return vector(readAVX512), vector(streamAVX512)
	case cpu.X86.HasAVX2:
		return vector(readAVX2), vector(streamAVX2)
	}
	return readWords, readWords
}
