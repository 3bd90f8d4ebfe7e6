package roofline

import (
	"fmt"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// Advanced SIMD (NEON) is part of every ARMv8-A CPU that Linux runs on; SVE's vectors may
// be wider (A64FX's 512 bits), and ggml uses them where the CPU has them.
func fmaNEON(n int64)
func fmaSVE(n int64)
func dotSDOT(n int64)
func dotSMULL(n int64)
func dotSMMLA(n int64)
func readNEON(p *uint64, n int64)
func streamNEON(p *uint64, n int64)

func fmaKernel() (string, func(int64), float64) {
	if cpu.ARM64.HasSVE {
		// This thread's vector length in bytes, which the threads it starts inherit.
		if vl, err := unix.PrctlRetInt(unix.PR_SVE_GET_VL, 0, 0, 0, 0); err == nil && vl&unix.PR_SVE_VL_LEN_MASK > 16 {
			bytes := vl & unix.PR_SVE_VL_LEN_MASK
			return fmt.Sprintf("sve-%d", 8*bytes), fmaSVE, 16 * float64(bytes/4) * 2
		}
	}
	return "neon", fmaNEON, 16 * 4 * 2
}

// dotKernel is the int8 dot product ggml's quantised matmuls use on this CPU: SMMLA where
// it has the int8 matrix multiply extension (its repacked Q4_0 kernels), SDOT where it
// has the dot-product extension (x/sys/cpu's ASIMDDP), else SMULL and SADALP.
func dotKernel() (string, func(int64), float64) {
	switch {
	case cpu.ARM64.HasI8MM:
		return "neon-i8mm", dotSMMLA, 16 * 32 * 2
	case cpu.ARM64.HasASIMDDP:
		return "neon-dotprod", dotSDOT, 16 * 16 * 2
	}
	return "neon", dotSMULL, 4 * 8 * 2
}

// bf16Kernel: none measured on arm64, where bf16 matmuls are judged under the FMA roof.
func bf16Kernel() (string, func(int64), float64) { return "", nil, 0 }

// readKernels' loops take a multiple of 256 bytes: one stream for the caches, four for
// memory.
func readKernels() (cache, memory func([]uint64)) { return vector(readNEON), vector(streamNEON) }
