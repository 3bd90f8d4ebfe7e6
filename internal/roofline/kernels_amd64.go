package roofline

import (
	"slices"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/profinfer/profinfer/internal/simd"
)

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

// has is cpuid's feature where /proc/cpuinfo lists it too, or where that cannot be read:
// host.cpu.simd is read from that file, so the roofs are measured with the vectors it names
// (a kernel booted with clearcpuid= lists fewer than cpuid reports).
func has(cpuid bool, flag string) bool {
	listed := hostFlags()
	return cpuid && (listed == nil || slices.Contains(listed, flag))
}

var hostFlags = sync.OnceValue(simd.HostFlags)

func fmaKernel() (string, func(int64), float64) {
	switch {
	case has(cpu.X86.HasAVX512F, "avx512f"):
		return "avx512", fmaAVX512, 10 * 16 * 2
	case has(cpu.X86.HasAVX2, "avx2") && has(cpu.X86.HasFMA, "fma"):
		return "avx2", fmaAVX2, 10 * 8 * 2
	}
	return "scalar", scalarFMA, 4 * 2
}

// dotKernel is the widest int8 dot product ggml's quantised matmuls use on this CPU
// (ggml-cpu's x86 quants and repack kernels): VPDPBUSD with AVX512-VNNI or AVX-VNNI,
// else VPMADDUBSW and VPMADDWD.
func dotKernel() (string, func(int64), float64) {
	switch {
	case has(cpu.X86.HasAVX512VNNI, "avx512_vnni"):
		return "avx512-vnni", dotVNNI512, 10 * 64 * 2
	case has(cpu.X86.HasAVXVNNI, "avx_vnni"):
		return "avx-vnni", dotVNNI256, 10 * 32 * 2
	case has(cpu.X86.HasAVX512BW, "avx512bw"):
		return "avx512bw", dotBW512, 4 * 64 * 2
	case has(cpu.X86.HasAVX2, "avx2"):
		return "avx2", dotAVX2, 4 * 32 * 2
	}
	return "scalar", scalarDot, 4 * 2
}

// bf16Kernel is the bf16 dot product ggml's bf16 matmuls use where the CPU has
// AVX512-BF16 (elsewhere they convert to fp32 and run under the FMA roof), and its FLOPs
// per iteration; nil where there is none.
func bf16Kernel() (string, func(int64), float64) {
	if has(cpu.X86.HasAVX512BF16, "avx512_bf16") {
		return "avx512-bf16", dotBF16, 10 * 16 * 2 * 2
	}
	return "", nil, 0
}

// readKernels' loops take a multiple of 256 bytes: one stream for the caches, four for
// memory.
func readKernels() (cache, memory func([]uint64)) {
	switch {
	case has(cpu.X86.HasAVX512F, "avx512f"):
		return vector(readAVX512), vector(streamAVX512)
	case has(cpu.X86.HasAVX2, "avx2"):
		return vector(readAVX2), vector(streamAVX2)
	}
	return readWords, readWords
}
