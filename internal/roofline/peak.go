package roofline

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/cpu"
)

func fmaAVX512(n int64)
func fmaAVX2(n int64)

// fmaKernel returns the widest FMA loop this CPU runs and its FLOPs per iteration; ggml
// picks the same instructions, so the probe measures the roof its matmuls run under.
func fmaKernel() (func(int64), float64) {
	switch {
	case cpu.X86.HasAVX512F:
		return fmaAVX512, 10 * 16 * 2
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return fmaAVX2, 10 * 8 * 2
	}
	return scalarFMA, 4 * 2
}

var sink float64

func scalarFMA(n int64) {
	a, b, c, d := 0.0, 0.0, 0.0, 0.0
	for ; n > 0; n-- {
		a, b, c, d = a*0.5+1, b*0.5+1, c*0.5+1, d*0.5+1
	}
	sink = a + b + c + d
}

// copyBytes is the buffer each CPU copies when measuring bandwidth, twice the size of
// any last-level cache share, so that the copies go to memory; the total is capped.
const (
	copyBytes = 32 << 20
	copyTotal = 256 << 20
)

// Measure probes this machine's peaks on every CPU at once, for about d: first fused
// multiply-adds on independent vector registers, then copies of buffers larger than the
// caches (read and written bytes both count).
func Measure(d time.Duration) Peaks {
	n := runtime.NumCPU()
	kernel, perIter := fmaKernel()
	const iters = 1 << 16
	flops := parallel(n, d/2, func(int) float64 {
		kernel(iters)
		return iters * perIter
	})
	size := min(copyBytes, copyTotal/(2*n))
	bufs := make([][2][]byte, n)
	for i := range bufs {
		bufs[i] = [2][]byte{make([]byte, size), make([]byte, size)}
		// Write both before timing: untouched pages all map the kernel's one zero page,
		// which a copy would read from L1.
		for j := range bufs[i][0] {
			bufs[i][0][j], bufs[i][1][j] = byte(j), byte(j)
		}
	}
	bw := parallel(n, d/2, func(w int) float64 {
		copy(bufs[w][1], bufs[w][0])
		return 2 * float64(size)
	})
	bufs = nil
	debug.FreeOSMemory()
	return Peaks{FLOPS: flops, Bandwidth: bw}
}

// parallel runs work on n locked OS threads until d has passed and returns the units of
// work done per second, all threads together.
func parallel(n int, d time.Duration, work func(worker int) float64) float64 {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total float64
	)
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			done := 0.0
			for time.Since(start) < d {
				done += work(w)
			}
			mu.Lock()
			total += done
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total / time.Since(start).Seconds()
}
