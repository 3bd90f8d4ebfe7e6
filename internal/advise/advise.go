// Package advise turns a process's measured figures into findings: what to change, each
// with the evidence it stands on. A rule fires only when its evidence is there, and is
// silent, not guessing, when the layer it needs is off.
package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/summary"
)

// Thresholds. Each is a share of the time the rule is about.
const (
	// Decode matmuls streaming weights at this fraction of the measured bandwidth have
	// little left to gain from more threads.
	memoryBoundFraction = 0.8
	// Threads waiting at barriers for this share of their node time are imbalanced, or
	// more than the machine serves well.
	barrierShare = 0.2
	// Threads off the CPU or waiting for one for this share of their node time are
	// contended.
	contentionShare = 0.1
	// Backend splits and copies taking this share of the decodes' time.
	offloadShare = 0.2
	// A MoE layer whose expert selections vary this much (coefficient of variation).
	moeImbalance = 0.5
	// An op with this share of a phase's graph time running under 10% of its roof.
	overheadShare = 0.05
	// A phase needs this many traced graphs before its figures are a verdict.
	minGraphs = 2
)

// Annotate sets every process's findings.
func Annotate(v *summary.View) {
	for _, p := range v.Processes {
		p.Findings = Findings(p)
	}
}

// Findings applies every rule to p, strongest first.
func Findings(p *summary.Process) []summary.Finding {
	out := []summary.Finding{}
	for _, rule := range []func(*summary.Process) (summary.Finding, bool){
		memoryBound, contention, barriers, offload, uneven, overhead,
	} {
		if f, ok := rule(p); ok {
			out = append(out, f)
		}
	}
	return out
}

func phase(p *summary.Process, name string) *summary.Phase {
	for _, ph := range p.Phases {
		if ph.Name == name && ph.TracedGraphs >= minGraphs {
			return ph
		}
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func gb(x float64) string { return fmt.Sprintf("%.1f GB/s", x/1e9) }

// memoryBound: decode's matmuls stream the weights near the measured bandwidth.
func memoryBound(p *summary.Process) (summary.Finding, bool) {
	ph := phase(p, "decode")
	if ph == nil || p.Roofs.Bandwidth <= 0 {
		return summary.Finding{}, false
	}
	var secs, bytes, share float64
	for _, o := range ph.Ops {
		if strings.HasPrefix(o.Op, "MUL_MAT") && o.Bandwidth > 0 {
			secs += o.TotalMS / 1e3
			bytes += o.Bandwidth * o.TotalMS / 1e3
			share += o.Share
		}
	}
	if secs == 0 {
		return summary.Finding{}, false
	}
	frac := bytes / secs / p.Roofs.Bandwidth
	if frac < memoryBoundFraction {
		return summary.Finding{}, false
	}
	return summary.Finding{
		ID: "decode-memory-bound", Severity: "info",
		Title:  "Decode is memory-bound: more threads will not make it faster",
		Advice: "Decode matmuls already stream the weights near this machine's memory bandwidth. A smaller quantisation (fewer bytes per weight), a smaller model, or faster memory will speed decode up; extra threads will not.",
		Evidence: []string{
			fmt.Sprintf("decode matmuls moved %s, %s of the measured %s roof", gb(bytes/secs), pct(frac), gb(p.Roofs.Bandwidth)),
			fmt.Sprintf("they take %s of decode graph time over %d traced graphs", pct(share), ph.TracedGraphs),
		},
	}, true
}

// worstPhase is the phase where time, a part of the threads' node time, is the largest
// share of it, and that share; nil when no phase has any.
func worstPhase(p *summary.Process, time func(summary.SchedSums) float64) (*summary.Phase, float64) {
	var worst *summary.Phase
	var worstShare float64
	for _, ph := range p.Phases {
		if ph.Sched.ThreadTime <= 0 || ph.TracedGraphs < minGraphs {
			continue
		}
		if share := time(ph.Sched) / ph.Sched.ThreadTime; share > worstShare {
			worst, worstShare = ph, share
		}
	}
	return worst, worstShare
}

// contention: the model's threads were switched out or waited for a CPU.
func contention(p *summary.Process) (summary.Finding, bool) {
	worst, worstShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.OffCPU + s.RunQueue })
	if worst == nil || worstShare < contentionShare {
		return summary.Finding{}, false
	}
	s := worst.Sched
	return summary.Finding{
		ID: "threads-contended", Severity: "warning",
		Title:  "The model's threads are contended for CPUs",
		Advice: "Threads were off the CPU, or runnable but waiting for one, for a large part of their node time. Check for a CPU quota (cgroup cpu.max), noisy neighbours, or -t/--threads above the cores this process really has; pin the threads or lower -t.",
		Evidence: []string{
			fmt.Sprintf("%s: %s of thread node time off the CPU (%s of it runnable, waiting for a CPU)", worst.Name, pct(worstShare), pct(s.RunQueue/max(s.OffCPU+s.RunQueue, 1e-12))),
			fmt.Sprintf("%d preemptions and %d migrations over %d traced graphs", s.Preemptions, s.Migrations, worst.TracedGraphs),
		},
	}, true
}

// barriers: threads waited for the slowest at node barriers.
func barriers(p *summary.Process) (summary.Finding, bool) {
	worst, worstShare := worstPhase(p, func(s summary.SchedSums) float64 { return s.BarrierWait })
	if worst == nil || worstShare < barrierShare {
		return summary.Finding{}, false
	}
	top := ""
	var topShare float64
	for _, o := range worst.Ops {
		if o.Sched.ThreadTime > 0 && o.Sched.BarrierWait > topShare*worst.Sched.BarrierWait {
			top, topShare = o.Op, o.Sched.BarrierWait/worst.Sched.BarrierWait
		}
	}
	return summary.Finding{
		ID: "barrier-wait", Severity: "warning",
		Title:  "Threads spend much of each node waiting for the slowest one",
		Advice: "The work of a node is split unevenly across threads, or there are more threads than this machine serves well (hyper-threads, other load). Try fewer threads (-t) and compare tokens/s; a thread count that divides the rows evenly helps small ops.",
		Evidence: []string{
			fmt.Sprintf("%s: %s of thread node time waiting at ggml_barrier", worst.Name, pct(worstShare)),
			fmt.Sprintf("most of it at %s nodes (%s of the wait)", top, pct(topShare)),
		},
	}, true
}

// offload: splits on other backends and the copies between them cost a large share.
func offload(p *summary.Process) (summary.Finding, bool) {
	for _, name := range []string{"decode", "prefill"} {
		var ph *summary.Phase
		for _, x := range p.Phases {
			if x.Name == name {
				ph = x
			}
		}
		if ph == nil || ph.DecodeSeconds <= 0 || ph.CopySeconds <= 0 {
			continue
		}
		share := ph.CopySeconds / ph.DecodeSeconds
		if share < offloadShare {
			continue
		}
		var moved int64
		for _, c := range p.Copies {
			moved += c.Bytes
		}
		return summary.Finding{
			ID: "offload-copies", Severity: "warning",
			Title:  "Copies between backends cost more than the offload saves",
			Advice: "Tensors cross between backends on every " + name + ". Offload more of the model (more -ngl layers) so splits are fewer, keep the layers that fall back to the CPU together, or keep the model on one backend.",
			Evidence: []string{
				fmt.Sprintf("%s: %s of llama_decode time copying tensors between backends", name, pct(share)),
				fmt.Sprintf("%s of splits on other backends; %.1f MB copied in all", pct(ph.SplitSeconds/ph.DecodeSeconds), float64(moved)/1e6),
			},
		}, true
	}
	return summary.Finding{}, false
}

// uneven: MoE routing concentrates on a few experts.
func uneven(p *summary.Process) (summary.Finding, bool) {
	var worst *summary.MoELayer
	n := 0
	for i := range p.MoE {
		l := &p.MoE[i]
		if l.Imbalance >= moeImbalance {
			n++
			if worst == nil || l.Imbalance > worst.Imbalance {
				worst = l
			}
		}
	}
	if worst == nil {
		return summary.Finding{}, false
	}
	var total, top int64
	for _, c := range worst.Selections {
		total += c
		top = max(top, c)
	}
	return summary.Finding{
		ID: "moe-uneven", Severity: "info",
		Title:  "MoE routing is uneven",
		Advice: "A few experts take most tokens. Keep the hot experts in the fastest memory (or on the GPU when offloading experts), and expect throughput to follow the busiest expert.",
		Evidence: []string{
			fmt.Sprintf("%d of %d MoE layers with a coefficient of variation of %.1f or more", n, len(p.MoE), moeImbalance),
			fmt.Sprintf("layer %d: %.2f; its busiest expert took %s of %d selections", worst.Layer, worst.Imbalance, pct(float64(top)/float64(max(total, 1))), total),
		},
	}, true
}

// overhead: an op with a real share of the time runs far below its roof.
func overhead(p *summary.Process) (summary.Finding, bool) {
	var found []string
	for _, ph := range p.Phases {
		// Off the CPU, an op runs slow for a reason the contention finding gives.
		if ph.TracedGraphs < minGraphs || ph.Sched.ThreadTime > 0 && (ph.Sched.OffCPU+ph.Sched.RunQueue)/ph.Sched.ThreadTime >= contentionShare {
			continue
		}
		for _, o := range ph.Ops {
			if o.Bound == "overhead" && o.Share >= overheadShare {
				found = append(found, fmt.Sprintf("%s %s (%s): %s of %s graph time at %s of its roof, %.1f µs a call",
					o.Op, o.Weight, ph.Name, pct(o.Share), ph.Name, pct(o.PeakFrac), o.MeanUS))
			}
		}
	}
	if len(found) == 0 {
		return summary.Finding{}, false
	}
	return summary.Finding{
		ID: "overhead-bound", Severity: "info",
		Title:    "Ops far below their roof: dispatch and synchronisation dominate",
		Advice:   "These ops move too little data or do too little work per call to approach the machine's limits; their time is per-call overhead and thread synchronisation. Fewer threads for small batches, larger batches (more parallel sequences), or fused kernels in a newer llama.cpp reduce it.",
		Evidence: found[:min(len(found), 5)],
	}, true
}
