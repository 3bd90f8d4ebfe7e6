package roofline

import "golang.org/x/sys/cpu"

func fmaAVX512(n int64)
func fmaAVX2(n int64)
func readAVX2(p *uint64, n int64)

func fmaKernel() (string, func(int64), float64) {
	switch {
	case cpu.X86.HasAVX512F:
		return "avx512", fmaAVX512, 10 * 16 * 2
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "avx2", fmaAVX2, 10 * 8 * 2
	}
	return "scalar", scalarFMA, 4 * 2
}

// readKernel's loops take a multiple of 256 bytes.
func readKernel() func([]uint64) {
	if cpu.X86.HasAVX2 {
		return func(w []uint64) { readAVX2(&w[0], int64(len(w))*8) }
	}
	return readWords
}
