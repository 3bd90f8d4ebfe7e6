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
			p.Phases[0].Ops[0].Bandwidth, p.Phases[0].Ops[0].PeakFrac = 42e9, 0.84
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
		{"cpu-fallback", func(p *summary.Process) { // the device's nodes read: layers left on the CPU
			offloaded(p, []int{1})
		}},
		{"cpu-fallback", func(p *summary.Process) { // ops the device did not run in its layers
			offloaded(p, []int{0, 1, 2})
		}},
		{"threads-contended", func(p *summary.Process) { // a software device's threads took the CPUs
			p.Software = "lavapipe"
			p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}, {Backend: "VK", Splits: 20, Seconds: 0.01}}
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Starved: true}
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
	p.Phases[0].Ops[0].Bandwidth, p.Phases[0].Ops[0].PeakFrac = 49e9, 0.98
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

// offloaded makes p a process that offloads layers to VK, whose nodes were read, and
// computes a large share on the CPU: the embedding rows, layers 0 to 2, and, in layer 2,
// a ROPE.
func offloaded(p *summary.Process, layers []int) {
	p.Loaded = []string{"vulkan"}
	p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 0.5},
		{Backend: "VK", Splits: 20, DeviceSplits: 20, DeviceSeconds: 0.5, Ops: map[string]int64{"MUL_MAT": 140}, Layers: layers}}
	ph := p.Phases[0]
	ph.GraphSeconds = 1
	ph.Layers = []summary.Layer{{Layer: 0, Seconds: 0.3, Share: 0.3}, {Layer: 1, Seconds: 0.3, Share: 0.3}, {Layer: 2, Seconds: 0.05, Share: 0.05}}
	ph.OpLayer = &summary.OpLayer{Ops: []string{"MUL_MAT", "ROPE"}, Layers: []int{0, 1, 2},
		Seconds: [][]float64{{0.3, 0.3, 0}, {0, 0, 0.05}}}
}

// cpu-fallback tells the layers the GPU layers setting left on the CPU (no matmul of theirs
// on the device) from ops the device's backend did not run in the layers it computes, and
// names each with its share; without the device's nodes it cannot, and says both causes.
func TestFallbackKinds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		layers   []int // the device's; nil: its nodes not read
		title    string
		evidence []string
		advice   []string // what the advice says
	}{
		{"both", []int{2, 3}, "The CPU computes 50% of a token that offloads to Vulkan: layers 0–1 left on the CPU, and ops Vulkan did not run (ROPE)",
			[]string{"layers 0–1, 60% of the CPU's traced decode time: left on the CPU by the GPU layers setting, with no matmul on Vulkan",
				"layer 2, 5% of the CPU's traced decode time: ops Vulkan did not run in layers it computes (ROPE 5%)",
				"the rest, 35%: the input's embedding rows, which the CPU always computes, and nodes whose names give no layer"},
			[]string{"left layers 0–1 on the CPU: offload more (-ngl, gpuLayers", "the CPU ran ROPE: the backend lacks those ops", "Another quantisation"}},
		{"left", []int{}, "The CPU computes 50% of a token that offloads to Vulkan: layers 0–2 left on the CPU",
			[]string{"layers 0–2, 65% of the CPU's traced decode time: left on the CPU by the GPU layers setting, with no matmul on Vulkan",
				"the rest, 35%: the input's embedding rows, which the CPU always computes, and nodes whose names give no layer"},
			[]string{"left layers 0–2 on the CPU"}},
		{"not run", []int{0, 1, 2}, "The CPU computes 50% of a token that offloads to Vulkan: ops Vulkan did not run (MUL_MAT, ROPE)",
			[]string{"layers 0–2, 65% of the CPU's traced decode time: ops Vulkan did not run in layers it computes (MUL_MAT 60%, ROPE 5%)",
				"the rest, 35%: the input's embedding rows, which the CPU always computes, and nodes whose names give no layer"},
			[]string{"the CPU ran MUL_MAT, ROPE"}},
		{"nodes not read", nil, "The CPU computes 50% of a token that offloads to Vulkan",
			[]string{"layers computed on the CPU: 0–2"},
			[]string{"Offload every layer", "ops the GPU backend does not support"}},
	} {
		p := clean()
		offloaded(p, tc.layers)
		if tc.layers == nil {
			p.Backends[1].Ops = nil
		}
		var f summary.Finding
		for _, g := range Findings(p) {
			if g.ID == "cpu-fallback" {
				f = g
			}
		}
		ev := f.Evidence[min(2, len(f.Evidence)):] // after the milliseconds and the top ops
		if f.Title != tc.title || strings.Join(ev, "\n") != strings.Join(tc.evidence, "\n") {
			t.Errorf("%s: %q\n%q, want %q\n%q", tc.name, f.Title, ev, tc.title, tc.evidence)
		}
		for _, a := range tc.advice {
			if !strings.Contains(f.Advice, a) {
				t.Errorf("%s: advice %q lacks %q", tc.name, f.Advice, a)
			}
		}
	}
}

// A software device (lavapipe) computes in the process's own threads: the starved
// finding names it as what took the CPUs, with advice that fits, and the barrier finding
// counts it as the other load; where every split ran on the CPU, it is not named.
func TestSoftwareDevice(t *testing.T) {
	p := clean()
	p.Software = "lavapipe"
	p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}, {Backend: "VK", Splits: 20, Seconds: 0.01}}
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Starved: true}
	p.Phases[0].Sched.BarrierWait = 0.6
	p.Phases[0].Ops[0].Sched = summary.SchedSums{BarrierWait: 0.5, ThreadTime: 1.4}
	want := map[string][]string{
		"threads-contended": {"the Vulkan device is lavapipe, a software driver", "LP_NUM_THREADS", "hardware GPU", "CPU backend alone", "Vulkan computes on lavapipe"},
		"barrier-wait":      {"the Vulkan device is lavapipe", "LP_NUM_THREADS"},
	}
	check := func(p *summary.Process, named bool) {
		t.Helper()
		for _, f := range Findings(p) {
			text := f.Title + " " + f.Advice + " " + strings.Join(f.Evidence, " ")
			for _, w := range want[f.ID] {
				if strings.Contains(text, w) != named {
					t.Errorf("%s names lavapipe %v: %q", f.ID, !named, text)
				}
			}
			if f.ID == "threads-contended" && strings.Contains(text, "noisy neighbours") == named {
				t.Errorf("threads-contended points at neighbours %v: %q", !named, text)
			}
		}
	}
	check(p, true)
	p.Backends = p.Backends[:1]
	check(p, false)
}
