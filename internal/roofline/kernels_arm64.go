package roofline

// Advanced SIMD (NEON) is part of every ARMv8-A CPU that Linux runs on.
func fmaNEON(n int64)
func readNEON(p *uint64, n int64)

func fmaKernel() (func(int64), float64) {
	return fmaNEON, 16 * 4 * 2
}

// readKernel's loop takes a multiple of 256 bytes.
func readKernel() func([]uint64) {
	return func(w []uint64) { readNEON(&w[0], int64(len(w))*8) }
}
