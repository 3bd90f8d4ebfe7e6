package assemble

import "github.com/profinfer/profinfer/internal/roofline"

// GraphCPU is what the threads of a graph's process had of the CPUs while it ran, summed
// over them: the kernel's runtime and run-queue wait of each, read at the graph's entry
// and exit. A running thread's runtime is brought up to date at scheduler ticks, so one
// graph's figures are exact to about a tick (4 ms at 250 Hz) per thread.
type GraphCPU struct {
	Known bool   // read at both ends, every thread summed
	Run   uint64 // ns on a CPU
	Wait  uint64 // ns runnable, waiting for a CPU; 0 where the kernel does not count it
	// MajFlt are the major page faults the threads took: each a wait for the disk
	// (weights read back from a model file the page cache did not hold).
	MajFlt uint64
	// Perturbed says that the graph ran while the collector itself was busy (Busy): its
	// share says as much about profinfer as about the machine, and no verdict uses it.
	Perturbed bool
	// Starved is roofline.IsStarved over the process's latest unperturbed graphs, this one
	// included unless perturbed: its nodes' wall time is no measure of their kernels.
	Starved bool
}

// recentGraphs is how many of a process's latest graphs its nodes are judged on.
const recentGraphs = 4

// recentCPU is the threads' CPU time, thread time (threads × wall) and wall time of a
// process's latest unperturbed graphs, a ring.
type recentCPU struct {
	run, thread, wall [recentGraphs]uint64
	n, next           int
}

func (r *recentCPU) add(run, thread, wall uint64) {
	r.run[r.next], r.thread[r.next], r.wall[r.next] = run, thread, wall
	r.next = (r.next + 1) % recentGraphs
	r.n = min(r.n+1, recentGraphs)
}

func (r *recentCPU) starved() bool {
	var run, thread, wall uint64
	for i := range r.n {
		run, thread, wall = run+r.run[i], thread+r.thread[i], wall+r.wall[i]
	}
	if thread == 0 {
		return false
	}
	return roofline.IsStarved(float64(run)/float64(thread), int64(r.n), float64(thread)/1e9, float64(wall)/1e9)
}

// busyKept is how many of the collector's busy spans are kept to check graphs against:
// a graph is assembled within a moment of its end.
const busyKept = 16

// busy is when the collector itself was busy (attaching, placing or removing a window's
// probes, reading a model file): on a machine whose cores the model's threads fill, its
// work takes their CPUs.
type busy struct {
	open  int    // busy spans begun and not ended
	since uint64 // when the first of them began
	spans [busyKept][2]uint64
	next  int
}

// Busy marks the collector busy from ts on (monotonic ns), until a matching Idle.
func (a *Assembler) Busy(ts uint64) {
	if a.busy.open == 0 {
		a.busy.since = ts
	}
	a.busy.open++
}

// Idle ends a span that Busy began.
func (a *Assembler) Idle(ts uint64) {
	b := &a.busy
	if b.open == 0 {
		return
	}
	if b.open--; b.open == 0 {
		b.spans[b.next] = [2]uint64{b.since, ts}
		b.next = (b.next + 1) % busyKept
	}
}

// overlaps says whether a graph from start to end ran while the collector was busy.
func (b *busy) overlaps(start, end uint64) bool {
	if b.open > 0 && end >= b.since {
		return true
	}
	for _, s := range b.spans {
		if s[1] != 0 && start <= s[1] && end >= s[0] {
			return true
		}
	}
	return false
}
