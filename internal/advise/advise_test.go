package advise

import (
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

// clean is a healthy process: decode matmuls at half the bandwidth, no contention, no
// barrier waits, no offload, even routing, every op well above its roof's 10%.
func clean() *summary.Process {
	return &summary.Process{
		Roofs: summary.Roofs{FLOPS: 200e9, Bandwidth: 50e9},
		Phases: []*summary.Phase{{
			Name: "decode", TracedGraphs: 10, DecodeSeconds: 1,
			Ops: []*summary.Op{
				{Op: "MUL_MAT", Weight: "q4_0", TotalMS: 700, Share: 0.7, Bound: "memory", Bandwidth: 25e9, PeakFrac: 0.5},
				{Op: "ADD", Weight: "none", TotalMS: 20, Share: 0.02, Bound: "overhead", PeakFrac: 0.05},
			},
			Sched: summary.SchedSums{ThreadTime: 2, OffCPU: 0.01, BarrierWait: 0.1},
		}},
		MoE: []summary.MoELayer{{Layer: 0, Selections: []int64{10, 11, 9, 10}, Imbalance: 0.07}},
	}
}

func fired(p *summary.Process) map[string]bool {
	out := map[string]bool{}
	for _, f := range Findings(p) {
		if f.Title == "" || f.Advice == "" || len(f.Evidence) == 0 {
			t := f
			panic("finding without title, advice or evidence: " + t.ID)
		}
		out[f.ID] = true
	}
	return out
}

func TestCleanRunIsSilent(t *testing.T) {
	if f := Findings(clean()); len(f) != 0 {
		t.Errorf("findings on a clean run: %+v", f)
	}
}

// Each rule fires on figures built to trigger it, and only it does.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		build func(p *summary.Process)
	}{
		{"decode-memory-bound", func(p *summary.Process) {
			p.Phases[0].Ops[0].Bandwidth = 42e9 // 84% of 50 GB/s
		}},
		{"threads-contended", func(p *summary.Process) {
			p.Phases[0].Sched.OffCPU, p.Phases[0].Sched.RunQueue = 0.2, 0.1
		}},
		{"barrier-wait", func(p *summary.Process) {
			p.Phases[0].Sched.BarrierWait = 0.6
			p.Phases[0].Ops[0].Sched = summary.SchedSums{BarrierWait: 0.5, ThreadTime: 1.4}
		}},
		{"offload-copies", func(p *summary.Process) {
			p.Phases[0].CopySeconds, p.Phases[0].SplitSeconds = 0.3, 0.5
			p.Copies = []summary.Copy{{Source: "CPU", Destination: "RPC", Bytes: 1e6}}
		}},
		{"moe-uneven", func(p *summary.Process) {
			p.MoE = append(p.MoE, summary.MoELayer{Layer: 1, Selections: []int64{40, 0, 0, 0}, Imbalance: 1.7})
		}},
		{"overhead-bound", func(p *summary.Process) {
			p.Phases[0].Ops[1].Share = 0.12
		}},
	} {
		p := clean()
		tc.build(p)
		got := fired(p)
		if !got[tc.rule] || len(got) != 1 {
			t.Errorf("%s: fired %v", tc.rule, got)
		}
	}
}

// Rules need their evidence: no roofs, no verdict on bandwidth; too few graphs, none.
func TestRulesNeedEvidence(t *testing.T) {
	p := clean()
	p.Phases[0].Ops[0].Bandwidth = 49e9
	p.Roofs = summary.Roofs{}
	if f := Findings(p); len(f) != 0 {
		t.Errorf("memory-bound without roofs: %+v", f)
	}
	// An op slow because its threads were off the CPU is contention, not overhead.
	p = clean()
	p.Phases[0].Ops[1].Share = 0.12
	p.Phases[0].Sched.OffCPU = 0.5
	if got := fired(p); got["overhead-bound"] || !got["threads-contended"] {
		t.Errorf("overhead beside contention: %v", got)
	}
	p = clean()
	p.Phases[0].TracedGraphs = 1
	p.Phases[0].Sched.OffCPU = 1
	if f := Findings(p); len(f) != 0 {
		t.Errorf("a verdict from one graph: %+v", f)
	}
}
