package summary

import (
	"fmt"

	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/simd"
)

// An op's verdict: what bounds it, or why it is slow where it is far from both roofs.
// Each names what the evidence shows; an op the evidence does not explain is unexplained,
// never overhead by default.
const (
	BoundMemory   = "memory"  // near the bandwidth roof
	BoundCompute  = "compute" // near the compute roof
	BoundOverhead = "overhead"
	// BoundStarved, BoundDisk and BoundBlocked: the phase's threads lacked their CPUs,
	// so the ops' wall time says more about that than about the kernels.
	BoundStarved = "starved" // runnable, waiting for a CPU
	BoundDisk    = "disk"    // asleep in major page faults
	BoundBlocked = "blocked" // asleep otherwise
	// BoundSIMD: far below its roof, in a build without vector instructions the CPU has.
	BoundSIMD        = "simd"
	BoundUnexplained = "unexplained"
)

// What a starved phase's threads lacked their CPUs for (ThreadsCPU.Lacked).
const (
	LackedCPU   = "cpu"     // runnable, waiting for one: other load, more threads than cores, a quota
	LackedDisk  = "disk"    // asleep in major page faults: data read back from disk
	LackedSleep = "blocked" // asleep otherwise: a lock, other I/O
)

// Evidence an op's verdict needs besides its phase's: calls enough to average out a
// call's timing (a timestamp and a barrier each), or time enough that one call's
// timing is exact.
const (
	minOpCalls   = 4
	minOpSeconds = 200e-6
)

// SIMDBelow is the fraction of its roof under which an op of a build without vector
// instructions its CPU has is judged by that: the roof is measured with the widest, out
// of its kernels' reach. A native build's decode matmuls stream their weights at some
// 60% of the bandwidth roof on the test bench's machines; a baseline build's at 10%.
const SIMDBelow = 0.5

// lacks says whether the build leaves out vector instructions the CPU has.
func (s SIMD) lacks() bool { return simd.Narrower(s.Build, s.Host) }

// judge gives the threads' figures their verdict, or says they are too thin for one.
func (c *ThreadsCPU) judge() {
	c.Share = min(c.OnCPU/max(c.ThreadSeconds, 1e-12), 1)
	c.Judged = roofline.Resolved(c.Graphs, c.ThreadSeconds, c.Wall)
	if !c.Judged {
		c.Thin = c.thin()
		return
	}
	c.Starved = roofline.IsStarved(c.Share, c.Graphs, c.ThreadSeconds, c.Wall)
	if c.Starved {
		c.Lacked = c.lacked()
	}
}

// thin says what a phase's threads' figures had where they are too few for a verdict.
func (c *ThreadsCPU) thin() string {
	if c.Graphs == 0 {
		return fmt.Sprintf("not judged: %s left out, run while profinfer attached or placed probes", count(c.Perturbed, "graph"))
	}
	if roofline.Enough(c.Graphs, c.ThreadSeconds) {
		return fmt.Sprintf("not judged: its graphs took %.2f ms on average, shorter than the %.0f ms scheduler tick at which the kernel counts a running thread's CPU time", 1e3*c.Wall/float64(c.Graphs), 1e3*roofline.AccountTick)
	}
	out := fmt.Sprintf("not judged: %s, %.0f ms of thread time", count(c.Graphs, "graph"), c.ThreadSeconds*1e3)
	if c.Perturbed > 0 {
		out += fmt.Sprintf(", and %d left out, run while profinfer attached or placed probes", c.Perturbed)
	}
	return out + fmt.Sprintf(" (a verdict needs %d graphs and %.0f ms)", roofline.MinGraphs, roofline.MinThreadSeconds*1e3)
}

// lacked is what starved threads lacked their CPUs for: the larger of the time they were
// runnable and waiting, and the time they slept; a sleep with a major fault a graph or
// more is a wait for the disk. A kernel that does not count waits (Wait 0 throughout)
// cannot tell waiting from sleeping, and other load is the commoner.
func (c *ThreadsCPU) lacked() string {
	slept := c.ThreadSeconds - c.OnCPU - c.Wait
	switch {
	case c.Wait >= slept || c.Wait == 0 && c.MajorFaults < c.Graphs:
		return LackedCPU
	case c.MajorFaults >= c.Graphs:
		return LackedDisk
	}
	return LackedSleep
}

// count is "1 graph" or "3 graphs".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// judgeOp gives op o of phase ph its verdict and what it stands on; "" and what is
// missing where the evidence is too thin.
func (ph *Phase) judgeOp(o *Op, simd SIMD) (bound, why string) {
	c := ph.CPU
	switch {
	case c != nil && !c.Judged:
		return "", c.Thin
	case c != nil && c.Starved:
		return starvedBound[c.Lacked], fmt.Sprintf("the phase's threads had a CPU for %.0f%% of their graphs' time (%s)", 100*c.Share, lackedWhat[c.Lacked])
	case o.Sched.ThreadTime > 0 && o.Sched.OffCPU >= (1-roofline.StarvedBelow)*o.Sched.ThreadTime:
		// The scheduler layer's figures, per node, where it is on.
		lacked := LackedCPU
		if o.Sched.RunQueue < o.Sched.OffCPU/2 {
			lacked = LackedSleep
			if c != nil && c.MajorFaults >= c.Graphs {
				lacked = LackedDisk
			}
		}
		return starvedBound[lacked], fmt.Sprintf("its threads were off the CPU for %.0f%% of its time (%s)", 100*o.Sched.OffCPU/o.Sched.ThreadTime, lackedWhat[lacked])
	case ph.TracedGraphs > 0 && ph.TracedPerturbed == ph.TracedGraphs:
		return "", fmt.Sprintf("not judged: its %s ran while profinfer attached or placed probes", count(ph.TracedGraphs, "traced graph"))
	case o.Calls < minOpCalls && o.TotalMS/1e3 < minOpSeconds:
		return "", fmt.Sprintf("not judged: %s, %.2f ms (a verdict needs %d calls or %.1f ms)", count(o.Calls, "call"), o.TotalMS, minOpCalls, minOpSeconds*1e3)
	case o.PeakFrac <= 0:
		return "", "not judged: no work and roof to judge it by (no roofs, or an attention whose masked cells are not known)"
	}
	at := fmt.Sprintf("%.1f%% of the %s roof", 100*o.PeakFrac, roofName[o.Roof])
	switch {
	case o.PeakFrac < roofline.OverheadBelow && o.MeanUS/1e6 < roofline.OverheadCall:
		return BoundOverhead, fmt.Sprintf("%s in calls of %.1f µs: a node's dispatch and barrier are most of such a call", at, o.MeanUS)
	case simd.lacks() && o.PeakFrac < SIMDBelow:
		return BoundSIMD, fmt.Sprintf("%s, in a build for %s on a CPU with %s", at, simd.Build, simd.Host)
	case o.PeakFrac >= roofline.OverheadBelow:
		return o.Roof, at
	}
	if ph.TracedFirst > 0 {
		// Its first touches of the weights and buffers (page faults, and on a virtual
		// machine the host's) slow the ops that read memory no graph read before.
		which := "its one traced graph"
		if ph.TracedGraphs > 1 {
			which = fmt.Sprintf("%d of its %d traced graphs", ph.TracedFirst, ph.TracedGraphs)
		}
		return "", fmt.Sprintf("not judged: %s in calls of %.0f µs, %s a new context's first, cold (its first reads of the weights and buffers): a later traced graph will judge it",
			at, o.MeanUS, which)
	}
	return BoundUnexplained, fmt.Sprintf("%s in calls of %.0f µs; checked: %s", at, o.MeanUS, checked(c, simd))
}

var starvedBound = map[string]string{LackedCPU: BoundStarved, LackedDisk: BoundDisk, LackedSleep: BoundBlocked}

var lackedWhat = map[string]string{
	LackedCPU:   "runnable, waiting for one",
	LackedDisk:  "asleep in major page faults, waiting for the disk",
	LackedSleep: "asleep, not for the disk",
}

// checked says what an unexplained op's phase was cleared of.
func checked(c *ThreadsCPU, simd SIMD) string {
	s := "the threads' CPU time not read"
	if c != nil {
		s = fmt.Sprintf("threads on a CPU %.0f%% of graph time, %d major faults", 100*c.Share, c.MajorFaults)
	}
	if simd.Build == "" {
		return s + ", the build's vector instructions not known"
	}
	return s + fmt.Sprintf(", built for %s as the CPU has", simd.Build)
}

var roofName = map[string]string{BoundMemory: "bandwidth", BoundCompute: "compute"}

// roofKind is the roof most of an op's classified time was judged against, BoundMemory
// or BoundCompute. Where its nodes do not name it (an older collector's, judged neither
// memory- nor compute-bound), it is the one its arithmetic intensity places it under
// with the process's roofs, below the ridge point or above it; "" without roofs.
func (o *Op) roofKind(roofs Roofs) string {
	switch {
	case o.memorySecs > 0 && o.memorySecs >= o.computeSecs:
		return BoundMemory
	case o.computeSecs > 0:
		return BoundCompute
	case roofs.Bandwidth <= 0 || roofs.FLOPS <= 0:
		return ""
	case o.Intensity > 0 && o.Intensity < roofs.FLOPS/roofs.Bandwidth:
		return BoundMemory
	}
	return BoundCompute
}
