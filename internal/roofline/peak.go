package roofline

import (
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"
)

// The architecture's kernels, in kernels_$GOARCH.go: fmaKernel returns the widest FMA
// loop this CPU runs, named, and its FLOPs per iteration, dotKernel the widest int8 dot
// product loop and its operations per iteration, bf16Kernel a bf16 one or none (ggml
// picks the same instructions, so the probe measures the roofs its kernels run under),
// readKernels the widest loops that stream words through the CPU.

// FMAKernel names the FMA loop the probe measures this CPU's compute roof with: avx512,
// avx2, scalar; neon, or sve-BITS with the vector length.
func FMAKernel() string {
	name, _, _ := fmaKernel()
	return name
}

// DotKernel names the int8 dot-product loop the probe measures the quantised matmuls'
// roof with: avx512-vnni, avx-vnni, avx512bw, avx2, scalar; neon-i8mm, neon-dotprod,
// neon; and the bf16 one, avx512-bf16 or "" where there is none.
func DotKernel() (dot, bf16 string) {
	dot, _, _ = dotKernel()
	bf16, _, _ = bf16Kernel()
	return dot, bf16
}

var sink float64

func scalarFMA(n int64) {
	a, b, c, d := 0.0, 0.0, 0.0, 0.0
	for ; n > 0; n-- {
		a, b, c, d = a*0.5+1, b*0.5+1, c*0.5+1, d*0.5+1
	}
	sink = a + b + c + d
}

func scalarDot(n int64) {
	var a, b, c, d int32
	x, y := int32(n&3), int32(n&5)
	for ; n > 0; n-- {
		a, b, c, d = a+x*y, b+x*y, c+x*y, d+x*y
	}
	sink = float64(a + b + c + d)
}

// vector calls a read loop on words.
func vector(loop func(p *uint64, n int64)) func([]uint64) {
	return func(w []uint64) { loop(&w[0], int64(len(w))*8) }
}

// readWords streams words through the CPU as the vector read loops do, where there are none.
func readWords(w []uint64) {
	var a, b, c, d uint64
	for i := 0; i+3 < len(w); i += 4 {
		a, b, c, d = a^w[i], b^w[i+1], c^w[i+2], d^w[i+3]
	}
	sink = float64(a ^ b ^ c ^ d)
}

// Memory's roof: each CPU streams reads through its own buffer, as decode streams
// weights: 64 MiB, 256 MiB in all at most, or where that is not 4 times the last-level
// cache, 4 times it in all (1 GiB at most), so that every read comes from memory. Reads
// go in chunks, so that a trial can end between them.
const (
	readBytes = 64 << 20
	readTotal = 256 << 20
	readMost  = 1 << 30
	readChunk = 256 << 10
)

// Trials: each roof is measured in trials until the best two agree, or its share of the
// probe duration has passed. Noise only slows a trial down, so the best one is the
// nearest to the peak. Trials of 2 ms read a fifth slower than 20 ms ones on an idle VM
// here (the vCPUs probably halt between them), and agreed on that lower value.
const (
	trialTime = 20 * time.Millisecond
	minTrials = 5
	agree     = 0.02
)

// measurement is one run of the probe.
type measurement struct {
	Peaks
	trials int // timed trials, all roofs together
	// share is of the CPUs' time over the probe, all together, that no other process
	// took: under 1, something else ran beside it. (The probe's own threads are idle
	// between trials, and the collector's other threads may run: neither is a neighbour.)
	share float64
}

// measure probes this machine's peaks on every CPU at once, one thread pinned to each,
// for at most about d: a quarter for fused multiply-adds, int8 dot products and, where
// the CPU has them, bf16 dot products on independent vector registers, a quarter for
// reads of buffers that fit each cache level (or of each of the ladder's sizes where
// sysfs lists no caches: one trial each at least), and half for reads of buffers far larger
// than the caches. A trial's rate is each thread's work over its own CPU time, summed: a
// thread descheduled for a neighbour then neither gains nor loses.
func measure(d time.Duration) measurement {
	start, others := time.Now(), othersCPU()
	cpus := allowedCPUs()
	ws := startWorkers(cpus)
	defer ws.stop()
	var m measurement
	loop := func(kernel func(int64), perIter float64) func(int) float64 {
		const iters = 1 << 14
		return func(int) float64 {
			kernel(iters)
			return iters * perIter
		}
	}
	_, fma, perFMA := fmaKernel()
	_, dot, perDot := dotKernel()
	_, bf16, perBF16 := bf16Kernel()
	compute := d / 4 / 2
	if bf16 != nil {
		compute = d / 4 / 3
	}
	ws.trial(trialTime, loop(fma, perFMA)) // the wide units power up, the clock settles
	m.FLOPS = ws.best(compute, loop(fma, perFMA), &m.trials)
	m.Int8 = ws.best(compute, loop(dot, perDot), &m.trials)
	if bf16 != nil {
		m.BF16 = ws.best(compute, loop(bf16, perBF16), &m.trials)
	}

	// The last-level cache sizes memory's buffers where sysfs tells it; a ladder's top
	// is no cache's size.
	var llc int64
	levels := caches("/sys/devices/system/cpu", cpus)
	if n := len(levels); n > 0 {
		llc = levels[n-1].Size
	} else {
		levels = ladder(len(cpus))
	}
	cache, memory := readKernels()
	for _, c := range levels {
		c.Bandwidth = ws.read(cache, c.perThread, d/4/time.Duration(len(levels)), &m.trials)
		m.Levels = append(m.Levels, c.Level)
	}
	if llc == 0 {
		ceilings(m.Levels)
	}
	n := int64(len(cpus))
	m.Bandwidth = ws.read(memory, min(max(min(readBytes, readTotal/n), 4*llc/n), readMost/n), d/2, &m.trials)
	m.share = 1 - float64(othersCPU()-others)/float64(time.Duration(len(cpus))*time.Since(start))
	debug.FreeOSMemory()
	return m
}

// read measures the read bandwidth of loop over buffers of size bytes, one a thread,
// over budget.
// Each thread writes its buffer before any timing (untouched pages all map the kernel's
// one zero page, which a read would find in L1; first touch also places the pages near
// its CPU), then reads it once to warm the caches, TLBs and prefetchers. A call of the
// work reads readChunk bytes: a buffer that small or smaller whole, as many times as fit.
func (ws *workers) read(loop func([]uint64), size int64, budget time.Duration, trials *int) float64 {
	size = max(256, size/256*256)
	chunk := min(size, readChunk)
	passes := max(1, readChunk/chunk)
	bufs := make([][]uint64, len(ws.jobs))
	next := make([]int64, len(ws.jobs))
	read := func(w int) float64 {
		for range passes {
			loop(bufs[w][next[w]/8 : (next[w]+chunk)/8])
			next[w] = (next[w] + chunk) % (size / chunk * chunk)
		}
		return float64(passes * chunk)
	}
	ws.once(func(w int) float64 {
		bufs[w] = make([]uint64, size/8)
		for i := range bufs[w] {
			bufs[w][i] = uint64(i)
		}
		for range size / chunk {
			read(w)
		}
		return 0
	})
	return ws.best(budget, read, trials)
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		set.Zero()
		for c := range runtime.NumCPU() {
			set.Set(c)
		}
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// workers are OS threads, one pinned to each CPU, that run trials together.
type workers struct {
	jobs []chan job
	done chan done
}

type job struct {
	d    time.Duration // 0: run work once
	work func(worker int) float64
}

type done struct {
	units      float64
	cpu        time.Duration
	start, end time.Time
}

func startWorkers(cpus []int) *workers {
	ws := &workers{done: make(chan done)}
	for w, c := range cpus {
		jobs := make(chan job)
		ws.jobs = append(ws.jobs, jobs)
		go func() {
			// Never unlocked: the thread ends with the goroutine, its affinity with it.
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(c)
			_ = unix.SchedSetaffinity(0, &set)
			for j := range jobs {
				c0, start := threadCPU(), time.Now()
				units := j.work(w)
				for time.Since(start) < j.d {
					units += j.work(w)
				}
				ws.done <- done{units: units, cpu: threadCPU() - c0, start: start, end: time.Now()}
			}
		}()
	}
	return ws
}

func (ws *workers) stop() {
	for _, j := range ws.jobs {
		close(j)
	}
}

// trial runs work on every thread for d and returns the summed rate, per CPU second of
// each thread, and whether the threads ran together: each on its CPU for at least
// minShare of the time from the first one's start to the last one's end. (A thread
// alone beside a neighbour that leaves the memory bus idle would read faster than it
// can beside its peers.)
func (ws *workers) trial(d time.Duration, work func(int) float64) (rate float64, together bool) {
	for _, j := range ws.jobs {
		j <- job{d: d, work: work}
	}
	var (
		least      time.Duration
		start, end time.Time
	)
	for i := range ws.jobs {
		r := <-ws.done
		if r.cpu > 0 {
			rate += r.units / r.cpu.Seconds()
		}
		if i == 0 {
			least, start, end = r.cpu, r.start, r.end
		}
		least = min(least, r.cpu)
		if r.start.Before(start) {
			start = r.start
		}
		if r.end.After(end) {
			end = r.end
		}
	}
	return rate, float64(least) >= minShare*float64(end.Sub(start))
}

// once runs work once on every thread.
func (ws *workers) once(work func(int) float64) { ws.trial(0, work) }

// best runs trials of work until the best two agree or budget has passed, at least one,
// adds their number to trials and returns the best rate. Only trials whose threads ran
// together count; if none did, the best of the others is all there is.
func (ws *workers) best(budget time.Duration, work func(int) float64, trials *int) float64 {
	var together, apart bestOf
	defer func() { *trials += together.n + apart.n }()
	for end := time.Now().Add(budget); !together.settled() && (together.n+apart.n == 0 || time.Now().Before(end)); {
		if r, ok := ws.trial(trialTime, work); ok {
			together.add(r)
		} else {
			apart.add(r)
		}
	}
	if together.n == 0 {
		return apart.first
	}
	return together.first
}

// othersCPU is the CPU time, all CPUs together, that went to any process but this one
// since boot: /proc/stat's busy ticks (USER_HZ, 100 a second on Linux) less this
// process's own time. Where /proc/stat cannot be read, none.
func othersCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	t, err := parseCPUTimes(b)
	var ru unix.Rusage
	if err != nil || unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(t.busy)*10*time.Millisecond - time.Duration(ru.Utime.Nano()+ru.Stime.Nano())
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// bestOf keeps the two best trials of a roof.
type bestOf struct {
	first, second float64
	n             int
}

func (b *bestOf) add(rate float64) {
	b.n++
	switch {
	case rate > b.first:
		b.first, b.second = rate, b.first
	case rate > b.second:
		b.second = rate
	}
}

// settled is true once there were enough trials and the best two agree.
func (b *bestOf) settled() bool {
	return b.n >= minTrials && b.second >= b.first*(1-agree)
}
