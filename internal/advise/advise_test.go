package advise

import (
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

// clean is a healthy process: decode matmuls at half the bandwidth, no contention, no
// barrier waits, no offload, even routing, every op well above its roof's 10%.
func clean() *summary.Process {
	return &summary.Process{
		Roofs: summary.Roofs{FLOPS: 200e9, Bandwidth: 50e9},
		Phases: []*summary.Phase{{
			Name: "decode", Decodes: 20, TracedGraphs: 10, DecodeSeconds: 1,
			Ops: []*summary.Op{
				{Op: "MUL_MAT", Weight: "q4_0", TotalMS: 700, Share: 0.7, Bound: "memory", Bandwidth: 25e9, PeakFrac: 0.5},
				{Op: "ADD", Weight: "none", TotalMS: 20, Share: 0.02, Bound: "overhead", PeakFrac: 0.05},
			},
			Sched: summary.SchedSums{ThreadTime: 2, OffCPU: 0.01, BarrierWait: 0.1},
			CPU:   &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.96, Share: 0.98},
		}},
		Quota: &summary.Quota{Cgroup: "/pod", CPUs: 4, Periods: 100, Throttled: 1, Threads: 2},
		MoE:   []summary.MoELayer{{Layer: 0, Selections: []int64{10, 11, 9, 10}, Imbalance: 0.07}},
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
		{"threads-contended", func(p *summary.Process) { // the default config: no scheduler layer
			p.Phases[0].Sched = summary.SchedSums{}
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Starved: true, Contended: 6, ContendedSeconds: 0.8, Cost: 0.5}
		}},
		{"threads-blocked", func(p *summary.Process) { // off the CPU, not waiting for one
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.4, Wait: 0.02, Share: 0.7, Starved: true}
		}},
		{"threads-contended", func(p *summary.Process) { // a kernel that does not count waits
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.4, Share: 0.7, Starved: true}
		}},
		{"cpu-quota", func(p *summary.Process) { // more threads than the quota's CPUs
			p.Quota.CPUs = 1.5
		}},
		{"cpu-quota", func(p *summary.Process) { // throttled
			p.Quota.Throttled = 30
		}},
		{"barrier-wait", func(p *summary.Process) {
			p.Phases[0].Sched.BarrierWait = 0.6
			p.Phases[0].Ops[0].Sched = summary.SchedSums{BarrierWait: 0.5, ThreadTime: 1.4}
		}},
		{"offload-copies", func(p *summary.Process) {
			p.Phases[0].CopySeconds, p.Phases[0].SplitSeconds = 0.3, 0.5
			p.Copies = []summary.Copy{{Source: "CPU", Destination: "RPC", Bytes: 1e6}}
		}},
		{"device-unused", func(p *summary.Process) { // Vulkan loaded, every split on the CPU
			p.Loaded = []string{"vulkan"}
			p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}}
		}},
		{"cpu-fallback", func(p *summary.Process) { // half the layers left on the CPU
			p.Loaded = []string{"vulkan"}
			p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 0.5}, {Backend: "VK", Splits: 20, DeviceSplits: 20, DeviceSeconds: 0.5}}
			p.Phases[0].Layers = []summary.Layer{{Layer: 0, Seconds: 0.2}, {Layer: 1, Seconds: 0.2}}
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
	// A full offload leaves the CPU the embedding's rows: no fallback.
	p0 := clean()
	p0.Loaded = []string{"vulkan"}
	p0.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 0.01}, {Backend: "VK", Splits: 20, DeviceSplits: 20, DeviceSeconds: 0.9}}
	if got := fired(p0); len(got) != 0 {
		t.Errorf("full offload: %v", got)
	}
	// The RPC backend's library computes nothing until asked to.
	p0.Loaded, p0.Backends = []string{"rpc"}, []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}}
	if got := fired(p0); len(got) != 0 {
		t.Errorf("rpc loaded: %v", got)
	}
	// Too few decodes to say a loaded backend is unused: it may not have started.
	p0.Loaded = []string{"vulkan"}
	p0.Backends, p0.Phases[0].Decodes = nil, 3
	if got := fired(p0); len(got) != 0 {
		t.Errorf("3 decodes: %v", got)
	}
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
	// Likewise when the default config's per-graph figures show it.
	p = clean()
	p.Phases[0].Ops[1].Share = 0.12
	p.Phases[0].CPU.Share, p.Phases[0].CPU.Starved = 0.6, true
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

// The contention and quota findings say what was measured: the share, the cost, the
// quota and the -t it supports.
func TestContentionAndQuotaEvidence(t *testing.T) {
	p := clean()
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 40, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Starved: true, Contended: 30, ContendedSeconds: 0.8, Cost: 0.5}
	p.Quota = &summary.Quota{Cgroup: "/job", CPUs: 1, Periods: 50, Throttled: 40, ThrottledSeconds: 3.2, Threads: 2}
	want := map[string][]string{
		"threads-contended": {
			"decode: the model's threads had a CPU for 50% of their graphs' time over 40 graphs, and were runnable but waiting for one for 45% of it",
			"its 30 contended graphs took 0.5 s more than at the others' time per token: 50% of decode time"},
		"cpu-quota": {
			"cgroup /job may use 1.00 CPUs; the model computes with 2 threads",
			"throttled in 40 of 50 periods (80%) while profiled, held back 3.2 s in all (summed over CPUs)"},
	}
	for _, f := range Findings(p) {
		if w, ok := want[f.ID]; !ok || strings.Join(f.Evidence, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s: %q, want %q", f.ID, f.Evidence, w)
		}
		if f.ID == "cpu-quota" && !strings.Contains(f.Advice, "supports -t 1") {
			t.Errorf("quota advice %q names no -t", f.Advice)
		}
		delete(want, f.ID)
	}
	if len(want) > 0 {
		t.Errorf("not fired: %v", want)
	}
	// With no graph that had its CPUs, no cost is claimed.
	p.Phases[0].CPU.Cost = 0
	p.Phases[0].TokensPerSec = 3.5
	if f := Findings(p); len(f) < 2 || f[1].Evidence[1] != "decode ran at 3.5 tokens/s; no graph had its CPUs to itself to measure the cost against" {
		t.Errorf("without a baseline: %q", f)
	}
}
