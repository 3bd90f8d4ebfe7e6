package advise

import (
	"fmt"
	"strings"

	"github.com/profinfer/profinfer/internal/metadata"
	"github.com/profinfer/profinfer/internal/roofline"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/summary"
)

// The roofline: ops against this machine's roofs, as the summary judged them.

// Thresholds of the roofline rules: shares of this machine's roofs, measured, or of the
// same phase's time, so that they mean the same on a slower or faster CPU.
var (
	memoryBoundFraction = &Threshold{Name: "memoryBoundFraction", Value: 0.8, Unit: Share,
		Why: "Decode matmuls at this share of their roofs (memory's bandwidth for the weights, measured on this machine) have little left to gain from more threads. A share of the machine's own roofs."}
	// The roofline's own, which give the op its verdict.
	overheadBelow = &Threshold{Name: "overheadBelow", Value: roofline.OverheadBelow, Unit: Share,
		Why: "Under a tenth of its roof, an op's time is not its kernel's work. A share of this machine's own roofs (roofline.OverheadBelow)."}
	overheadCall = &Threshold{Name: "overheadCall", Value: roofline.OverheadCall, Unit: Micro,
		Why: "In a call this short, a node's fixed cost (its dispatch and the barrier that ends it, some microseconds) is most of its time (roofline.OverheadCall). " +
			"A time: a slower CPU's calls are longer, and its fixed cost with them, so the same op is judged alike on either."}
	overheadShare = &Threshold{Name: "overheadShare", Value: 0.05, Unit: Share,
		Why: "An overhead-bound op with a twentieth of a phase's graph time is worth fusing or batching; below it, one of many small ops. A share of the same phase's time."}
)

var memoryBoundRule = Rule{
	ID:         "decode-memory-bound",
	Name:       "decode is memory-bound",
	Reads:      []string{metadata.MetricsInfo.ProfinferRooflinePeak.Name, schema.GGMLRooflinePeakFraction, schema.GGMLBytes},
	Fires:      "decode matmuls reach ≥ {memoryBoundFraction} of their roofs (memory's for the weights)",
	Says:       "more threads will not help; a smaller quantisation or faster memory will",
	Thresholds: []*Threshold{memoryBoundFraction},
	apply:      memoryBound,
}

// memoryBound: decode's matmuls stream the weights near the measured bandwidth.
func memoryBound(p *summary.Process) (summary.Finding, bool) {
	ph := phase(p, "decode")
	if ph == nil || p.Roofs.Bandwidth <= 0 {
		return summary.Finding{}, false
	}
	// Each op's fraction is of its nodes' own roofs (roofline.Attained), the bytes that
	// the graph made coming from the caches: never above 1 where no node was.
	var secs, bytes, share, atRoof float64
	for _, o := range ph.Ops {
		if strings.HasPrefix(o.Op, "MUL_MAT") && o.Bandwidth > 0 {
			secs += o.TotalMS / 1e3
			bytes += o.Bandwidth * o.TotalMS / 1e3
			share += o.Share
			atRoof += o.PeakFrac * o.TotalMS / 1e3
		}
	}
	if secs == 0 {
		return summary.Finding{}, false
	}
	frac := atRoof / secs
	if frac < memoryBoundFraction.Value {
		return summary.Finding{}, false
	}
	return summary.Finding{
		Severity: summary.Info,
		Title:    "Decode is memory-bound: more threads will not make it faster",
		Advice:   "Decode matmuls already stream the weights near this machine's memory bandwidth. A smaller quantisation (fewer bytes per weight), a smaller model, or faster memory will speed decode up; extra threads will not.",
		Evidence: []string{
			fmt.Sprintf("decode matmuls moved %s, %s of their roofs (memory's measured %s)", gb(bytes/secs), pct(frac), gb(p.Roofs.Bandwidth)),
			fmt.Sprintf("they take %s of decode graph time over %d traced graphs", pct(share), ph.TracedGraphs),
		},
	}, true
}

var overheadRule = Rule{
	ID:    "overhead-bound",
	Name:  "overhead-bound op",
	Reads: []string{schema.GGMLRooflinePeakFraction, schema.SpanNode, schema.GGMLSchedOffCPUNS},
	Fires: "an op with ≥ {overheadShare} of a phase's graph time is [judged](roofline.md#the-roofline) `overhead`: under {overheadBelow} of its roof in calls of under {overheadCall}, its threads on their CPUs " +
		"(with the scheduler layer, off them under {contentionShare} of their node time)",
	Says:       "dispatch and synchronisation dominate",
	Thresholds: []*Threshold{overheadShare, overheadBelow, overheadCall, contentionShare},
	apply:      overhead,
}

// overhead: an op with a real share of the time runs far below its roof.
func overhead(p *summary.Process) (summary.Finding, bool) {
	var found []string
	for _, ph := range p.Phases {
		// Off the CPU, as the scheduler layer's per-node figures show, an op runs slow for
		// a reason the contention finding gives.
		if !judged(ph) || ph.Sched.ThreadTime > 0 && (ph.Sched.OffCPU+ph.Sched.RunQueue)/ph.Sched.ThreadTime >= contentionShare.Value {
			continue
		}
		for _, o := range ph.Ops {
			if o.Bound == summary.BoundOverhead && o.Share >= overheadShare.Value {
				found = append(found, fmt.Sprintf("%s %s (%s): %s of %s graph time at %s of its roof, %.1f µs a call",
					o.Op, o.Weight, ph.Name, pct(o.Share), ph.Name, pct(o.PeakFrac), o.MeanUS))
			}
		}
	}
	if len(found) == 0 {
		return summary.Finding{}, false
	}
	return summary.Finding{
		Severity: summary.Info,
		Title:    "Ops far below their roof in short calls: dispatch and synchronisation dominate",
		Advice:   "These ops move too little data or do too little work per call to approach the machine's limits, with their threads on their CPUs: their time is per-call overhead and thread synchronisation. Fewer threads for small batches, larger batches (more parallel sequences), or fused kernels in a newer llama.cpp reduce it.",
		Evidence: found[:min(len(found), 5)],
	}, true
}
