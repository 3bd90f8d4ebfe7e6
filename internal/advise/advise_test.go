package advise

import (
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/signals"
	"github.com/profinfer/profinfer/internal/summary"
)

// clean is a healthy process: decode matmuls at half the bandwidth, no contention, no
// barrier waits, no offload, even routing, every op well above its roof's 10%.
func clean() *summary.Process {
	return &summary.Process{
		Roofs: summary.Roofs{FLOPS: 200e9, Bandwidth: 50e9},
		Phases: []*summary.Phase{{
			Name: "decode", Decodes: 20, Tokens: 20, TracedGraphs: 10, DecodeSeconds: 1,
			Ops: []*summary.Op{
				{Op: "MUL_MAT", Weight: "q4_0", TotalMS: 700, Share: 0.7, Bound: "memory", Bandwidth: 25e9, PeakFrac: 0.5},
				{Op: "ADD", Weight: "none", TotalMS: 20, Share: 0.02, Bound: "overhead", PeakFrac: 0.05},
			},
			Sched: summary.SchedSums{ThreadTime: 2, OffCPU: 0.01, BarrierWait: 0.1},
			CPU:   &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.96, Share: 0.98, Judged: true},
		}},
		Quota: &summary.Quota{Cgroup: "/pod", CPUs: 4, Periods: 100, Throttled: 1, Threads: 2},
		CPUs:  &summary.CPUs{Allowed: 4, Cores: 2, Threads: 2},
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
	tested := map[string]bool{}
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
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU, Contended: 6, ContendedSeconds: 0.8, Cost: 0.5}
		}},
		{"threads-queued", func(p *summary.Process) { // waiting, and no other process took the CPUs
			p.Phases[0].Sched = summary.SchedSums{}
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU, Contended: 6, ContendedSeconds: 0.8, Cost: 0.5}
			p.CPUs = &summary.CPUs{Allowed: 4, Cores: 2, Threads: 2, Idle: 1.9, Measured: true, Others: 0.05, OthersMeasured: true}
		}},
		{"threads-blocked", func(p *summary.Process) { // off the CPU, not waiting for one
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.4, Wait: 0.02, Share: 0.7, Judged: true, Starved: true, Lacked: summary.LackedSleep}
		}},
		{"threads-contended", func(p *summary.Process) { // a kernel that does not count waits
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.4, Share: 0.7, Judged: true, Starved: true, Lacked: summary.LackedCPU}
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
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU}
		}},
		{"threads-over-cpus", func(p *summary.Process) { // 8 threads on 4 CPUs: starved, and not contention's
			p.CPUs.Threads, p.Quota.Threads = 8, 8
			p.Quota.CPUs = 0
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU}
		}},
		{"threads-over-cpus", func(p *summary.Process) { p.CPUs.Threads = 4 }}, // SMT siblings
		{"threads-over-cpus", func(p *summary.Process) { // a hybrid CPU's efficient cores
			p.CPUs = &summary.CPUs{Allowed: 20, Cores: 14, Performance: 6, Threads: 8}
			p.Quota = nil
		}},
		{"threads-few", func(p *summary.Process) { p.CPUs.Threads = 1 }},
		{"simd-narrow", func(p *summary.Process) { // a baseline build on an AVX2 CPU, its matmuls held back
			p.SIMD = summary.SIMD{Build: "sse2", Host: "avx2"}
			p.Phases[0].Ops[0].Bound, p.Phases[0].Ops[0].PeakFrac = summary.BoundSIMD, 0.2
		}},
		{"oom-killed", func(p *summary.Process) {
			p.End = &summary.End{Cause: "killed by SIGKILL: the OOM killer", OOM: "cgroup", Cgroup: "/bench", Limit: 600e6, Peak: 599e6, Text: "killed by SIGKILL"}
		}},
		{"ubatch-small", func(p *summary.Process) { // a 128-token prompt 8 tokens a graph
			p.Phases = append(p.Phases, &summary.Phase{Name: "prefill", Decodes: 2, Tokens: 256, DecodeSeconds: 2, Ubatch: 8, MaxBatch: 128})
		}},
		{"prompt-recomputed", func(p *summary.Process) { // a conversation's turns, each computed from the start
			p.Requests = &summary.Requests{Count: 4, Input: 2000, Output: 200, Recomputed: 3, RecomputedTokens: 1200}
			p.Phases = append(p.Phases, &summary.Phase{Name: "prefill", Decodes: 4, Tokens: 2000, DecodeSeconds: 4})
		}},
		{"requests-queued", func(p *summary.Process) { // four requests at once to one slot
			p.Requests = &summary.Requests{Count: 4, Input: 400, Output: 64, Queued: 3, QueuedWait: 3, QueuedTTFT: 0.6,
				Wait: &summary.Quantiles{Count: 4, P50: 1000, P90: 1500, Max: 1500}}
		}},
		{"context-full", func(p *summary.Process) { // a slot's share of -c reached, generation cut
			p.Requests = &summary.Requests{Count: 4, Output: 300, Full: 1, Truncated: 1, MaxCells: 255}
			p.Serving = &summary.Serving{Steps: 300, Sequences: 600, MaxSequences: 2, Slots: 2, Context: 512, SeqContext: 256}
		}},
		{"context-full", func(p *summary.Process) { // shifted instead
			p.Requests = &summary.Requests{Count: 4, Output: 300, Full: 1, Shifts: 2, MaxCells: 256}
		}},
		{"prompts-stall", func(p *summary.Process) { // others' prompts computed between a request's tokens
			p.Requests = &summary.Requests{Count: 8, Output: 320, Stalled: 5, StallPrompts: 900, StallSeconds: 3, StallOutput: 200,
				GapMedian: summary.Quantiles{Count: 8, P50: 60}, GapMax: summary.Quantiles{Count: 8, P50: 600, P90: 900, Max: 950}}
			p.Phases = append(p.Phases, &summary.Phase{Name: "mixed", Decodes: 5, Tokens: 930, PromptTokens: 900, NextTokens: 30, DecodeSeconds: 3, MaxBatch: 190})
		}},
		{"batching-little", func(p *summary.Process) { // two sequences a step at 1.7× one
			p.Phases[0].Widths = []summary.Width{
				{Width: "1", Steps: 20, StepMS: summary.Quantiles{P50: 32}, Sequences: 1, Cost: 1, Gain: 1},
				{Width: "2", Steps: 100, StepMS: summary.Quantiles{P50: 54}, Sequences: 2, Cost: 1.7, Gain: 1.18}}
		}},
		{"attention-long", func(p *summary.Process) { // depth 1536, flash attention off
			p.Phases[0].KVCells, p.Phases[0].MaxCells = 1536, 1600
			p.Phases[0].Deepest = &summary.Deepest{Cells: 1536, Seconds: 0.05, Attention: 0.015}
			p.Phases[0].Depth = &summary.DepthFit{Graphs: 200, From: 1400, To: 1600, MSPer1k: 9.5, BaseMS: 36}
			p.Phases[0].Ops = append(p.Phases[0].Ops, &summary.Op{Op: "MUL_MAT", Weight: summary.KVPrefix + "f16", Share: 0.25, Bound: "memory", PeakFrac: 0.4},
				&summary.Op{Op: "SOFT_MAX", Weight: "none", Share: 0.05, Bound: "memory", PeakFrac: 0.4})
		}},
		{"cold-start", func(p *summary.Process) { // the model read from disk by the first graph, and the disk wait is its
			p.Cold = &summary.Cold{Phase: "decode", Seconds: 3, Faults: 9000, Warm: 0.05, WarmGraphs: 30, WarmFaults: 1}
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.2, Wait: 0.02, Share: 0.6, Judged: true, Starved: true, Lacked: summary.LackedDisk, MajorFaults: 9001}
		}},
		{"cold-start", func(p *summary.Process) { // from the page cache: no fault, the first touch
			p.Cold = &summary.Cold{Phase: "prefill", Seconds: 1.7, Warm: 0.2, WarmGraphs: 30}
		}},
		{"idle-reclaimed", func(p *summary.Process) { // the model's pages reclaimed while a server idled, read back by its next prompt
			p.Resumed = &summary.Resumed{Phase: "prefill", Idle: 30, Seconds: 1.6, Faults: 2400, Warm: 0.14, Graphs: 1, AllFaults: 2400}
			p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 4, OnCPU: 2.8, Wait: 0.02, Share: 0.7, Judged: true, Starved: true, Lacked: summary.LackedDisk, MajorFaults: 2400}
		}},
		{"moe-uneven", func(p *summary.Process) {
			p.MoE = append(p.MoE, summary.MoELayer{Layer: 1, Selections: []int64{80, 0, 0, 0}, Imbalance: 1.7})
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
		tested[tc.rule] = true
	}
	for _, r := range Rules {
		if !tested[r.ID] {
			t.Errorf("no case fires %s", r.ID)
		}
	}
}

// Threads that waited for a CPU: what other processes took of the CPUs meanwhile, and
// contention's other causes, say whose the waits were.
func TestWaitsWhose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others float64 // CPUs' worth, of 4
		build  func(p *summary.Process)
		want   []string
	}{
		{"the machine otherwise idle", 0.05, nil, []string{"threads-queued"}},
		{"a neighbour took the CPUs", 1.5, nil, []string{"threads-contended"}},
		{"a neighbour, just enough", 0.9, nil, []string{"threads-contended"}}, // 22.5% against 45%'s half
		{"a neighbour, too little", 0.8, nil, []string{"threads-queued"}},
		{"more threads than CPUs", 0.05, func(p *summary.Process) { p.CPUs.Threads, p.Quota.Threads = 8, 8; p.Quota.CPUs = 0 }, []string{"threads-over-cpus"}},
		{"a quota", 0.05, func(p *summary.Process) { p.Quota.CPUs = 1.5 }, []string{"cpu-quota", "threads-contended"}},
		{"a software device", 0.05, func(p *summary.Process) {
			p.Software = "lavapipe"
			p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}, {Backend: "VK", Splits: 20, Seconds: 0.01}}
		}, []string{"threads-contended"}},
	} {
		p := clean()
		p.Phases[0].Sched = summary.SchedSums{}
		p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU, Contended: 6, ContendedSeconds: 0.8, Cost: 0.5}
		p.CPUs = &summary.CPUs{Allowed: 4, Cores: 4, Threads: 2, Idle: 2, Measured: true, Others: tc.others, OthersMeasured: true}
		if tc.build != nil {
			tc.build(p)
		}
		got := fired(p)
		if len(got) != len(tc.want) {
			t.Errorf("%s: fired %v, want %v", tc.name, got, tc.want)
		}
		for _, id := range tc.want {
			if !got[id] {
				t.Errorf("%s: fired %v, want %v", tc.name, got, tc.want)
			}
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
	// Likewise when the default config's per-graph figures show it, and the summary's
	// verdict on the op says so.
	p = clean()
	p.Phases[0].Ops[1].Share, p.Phases[0].Ops[1].Bound = 0.12, summary.BoundStarved
	p.Phases[0].CPU.Share, p.Phases[0].CPU.Starved, p.Phases[0].CPU.Lacked = 0.6, true, summary.LackedCPU
	if got := fired(p); got["overhead-bound"] || !got["threads-contended"] {
		t.Errorf("overhead beside contention: %v", got)
	}
	// A prefill's five graphs starved while a server's front end took a batch of
	// requests, beside a decode that had its CPUs: said, as information.
	p = clean()
	p.Phases = append(p.Phases, &summary.Phase{Name: "prefill", Decodes: 5, Tokens: 100, DecodeSeconds: 0.6,
		CPU: &summary.ThreadsCPU{Graphs: 5, ThreadSeconds: 1.2, OnCPU: 0.92, Wait: 0.28, Share: 0.77, Judged: true, Starved: true, Lacked: summary.LackedCPU}})
	for _, f := range Findings(p) {
		if f.ID != "threads-contended" || f.Severity != "info" {
			t.Errorf("a prefill's burst of contention, 9%% of the graphs' time: %s %s %v", f.ID, f.Severity, f.Evidence)
		}
	}
	p.Phases[1].DecodeSeconds = 2 // the same share over most of the process's time
	if got := Findings(p); len(got) != 1 || got[0].Severity != "warning" {
		t.Errorf("contention over most of the run: %+v", got)
	}
	p = clean()
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 1, ThreadSeconds: 0.05, OnCPU: 0.01, Share: 0.2, Thin: "not judged: 1 graph"}
	p.Phases[0].Sched.OffCPU = 1
	if f := Findings(p); len(f) != 0 {
		t.Errorf("a verdict from one graph: %+v", f)
	}
	// A decode traced only at depth 0 (llama-bench's warm-up token) stands for no decode
	// at 2048: its attention is not judged from it.
	p = clean()
	p.Phases[0].KVCells, p.Phases[0].MaxCells = 1, 2096
	p.Phases[0].Deepest = &summary.Deepest{Cells: 1, Seconds: 0.02, Attention: 0.0004}
	if f := Findings(p); len(f) != 0 {
		t.Errorf("attention from a graph at depth 1 of decodes at 2096: %+v", f)
	}
	// Its growth with the depth: the line through every decode where there is one, else
	// the traced graph's attention in proportion.
	for _, fit := range []*summary.DepthFit{nil, {Graphs: 200, From: 1400, To: 1600, MSPer1k: 9.5, BaseMS: 36}} {
		p = clean()
		p.Phases[0].KVCells, p.Phases[0].MaxCells = 1536, 1600
		p.Phases[0].Deepest = &summary.Deepest{Cells: 1536, Seconds: 0.05, Attention: 0.015}
		p.Phases[0].Depth = fit
		want := "in proportion to the depth"
		if fit != nil {
			want = "9.50 ms a token more for each 1000 cells, fitted over 200 decodes from 1400 to 1600 cells deep"
		}
		if f := Findings(p); len(f) != 1 || !strings.Contains(strings.Join(f[0].Evidence, "\n"), want) {
			t.Errorf("attention's growth, fit %+v: %+v, want …%s…", fit, f, want)
		}
	}
	// Steps of four sequences at 1.6× one paid; steps of two against too few of one are no
	// comparison; one request stalled once is a server's ordinary life.
	p = clean()
	p.Phases[0].Widths = []summary.Width{
		{Width: "1", Steps: 20, StepMS: summary.Quantiles{P50: 32}, Sequences: 1, Cost: 1, Gain: 1},
		{Width: "4", Steps: 100, StepMS: summary.Quantiles{P50: 51}, Sequences: 4, Cost: 1.6, Gain: 2.5}}
	p.Requests = &summary.Requests{Count: 8, Output: 320, Stalled: 1, StallSeconds: 0.4,
		GapMedian: summary.Quantiles{Count: 8, P50: 60}, GapMax: summary.Quantiles{Count: 8, P50: 70, Max: 500}}
	if f := Findings(p); len(f) != 0 {
		t.Errorf("batching that paid, one stall: %+v", f)
	}
	p.Phases[0].Widths = []summary.Width{
		{Width: "1", Steps: 3, StepMS: summary.Quantiles{P50: 32}, Sequences: 1, Cost: 1, Gain: 1},
		{Width: "2", Steps: 100, StepMS: summary.Quantiles{P50: 60}, Sequences: 2, Cost: 1.9, Gain: 1.05}}
	if f := Findings(p); len(f) != 0 {
		t.Errorf("steps of two against 3 of one: %+v", f)
	}
	p = clean()
	p.Phases[0].TracedPerturbed = p.Phases[0].TracedGraphs
	p.Phases[0].Sched.OffCPU = 1
	if f := Findings(p); len(f) != 0 {
		t.Errorf("a verdict from graphs traced beside the collector's attach: %+v", f)
	}
	// Beside two busy loops, a first decode graph of 1.68 s against 0.53 s, with no fault:
	// the contention's, not a cold start's.
	p = clean()
	p.Cold = &summary.Cold{Phase: "decode", Seconds: 1.68, Warm: 0.53, WarmGraphs: 11}
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 12, ThreadSeconds: 13, OnCPU: 6.4, Wait: 6.6, Share: 0.49, Judged: true, Starved: true, Lacked: summary.LackedCPU}
	if got := fired(p); got["cold-start"] || !got["threads-contended"] {
		t.Errorf("a starved phase's first graph, no fault: %v", got)
	}
	// A short run's last MoE layer, which routes one token a decode: 20 selections over 8
	// experts vary some 0.59 by chance alone (0.57 here).
	p = clean()
	sel := []int64{5, 4, 1, 3, 2, 1, 3, 1}
	p.MoE = []summary.MoELayer{{Layer: 11, Selections: sel, Imbalance: signals.Imbalance(sel)}}
	if f := Findings(p); len(f) != 0 {
		t.Errorf("routing %.2f uneven over %d selections: %+v", p.MoE[0].Imbalance, 20, f)
	}
}

// A rule gives way to another only where that one's finding is made and its Defer's
// condition holds; the apply functions themselves still find what they find.
func TestDefers(t *testing.T) {
	starvedCPU := &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU}
	// 8 threads on 4 CPUs: the contention's cause is known, and threads-over-cpus says it.
	p := clean()
	p.CPUs.Threads, p.Quota = 8, nil
	p.Phases[0].CPU = starvedCPU
	if _, ok := contention(p); !ok {
		t.Fatal("contention: not found where the threads lacked their CPUs")
	}
	if got := fired(p); !got["threads-over-cpus"] || got["threads-contended"] {
		t.Errorf("8 threads on 4 CPUs: %v, want threads-over-cpus alone", got)
	}
	// 4 threads on 2 cores' SMT siblings is information, no cause of the contention: both.
	p.CPUs.Threads = 4
	if got := fired(p); !got["threads-over-cpus"] || !got["threads-contended"] {
		t.Errorf("4 threads on 2 cores, starved: %v, want both", got)
	}
	// A cold start whose faults are a tenth of its phase's: the rest are the phase's own
	// disk waits, said beside it.
	p = clean()
	p.Cold = &summary.Cold{Phase: "decode", Seconds: 3, Faults: 9000, Warm: 0.05, WarmGraphs: 30, WarmFaults: 1}
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1.2, Wait: 0.02, Share: 0.6, Judged: true, Starved: true, Lacked: summary.LackedDisk, MajorFaults: 90000}
	if got := fired(p); !got["cold-start"] || !got["threads-blocked"] || len(got) != 2 {
		t.Errorf("a thrashing run with a cold start: %v, want cold-start and threads-blocked", got)
	}
	// The same faults, nine in ten of them the cold start's and the graphs' after an
	// idle spell together: the disk waits are theirs.
	p.Resumed = &summary.Resumed{Phase: "decode", Idle: 30, Seconds: 1.6, Faults: 75000, Warm: 0.05, Graphs: 3, AllFaults: 75000}
	if got := fired(p); !got["cold-start"] || !got["idle-reclaimed"] || got["threads-blocked"] {
		t.Errorf("faults the cold start's and the idle spells': %v, want no threads-blocked", got)
	}
}

// Steps of 4 sequences, which share the weights' reading, that still buy little: the
// CPU's compute bounds them (llama.cpp's AVX2 kernels on the test bench, 1.30× a single
// sequence's tokens), and the advice says so rather than asking for more slots.
func TestBatchingComputeBound(t *testing.T) {
	p := clean()
	p.Phases[0].Ops[0].Roof = summary.BoundCompute
	p.Phases[0].Widths = []summary.Width{
		{Width: "1", Steps: 31, StepMS: summary.Quantiles{P50: 20.2}, Sequences: 1, Cost: 1, Gain: 1},
		{Width: "4", Steps: 78, StepMS: summary.Quantiles{P50: 62.1}, Sequences: 4, Cost: 3.07, Gain: 1.30}}
	var f *summary.Finding
	for _, x := range Findings(p) {
		if x.ID == "batching-little" {
			f = &x
		}
	}
	if f == nil {
		t.Fatal("batching-little did not fire")
	}
	evidence := strings.Join(f.Evidence, "; ")
	if !strings.Contains(f.Advice, "the CPU's compute, not the weights' reading, bounds them") || strings.Contains(f.Advice, "4 or more slots") ||
		!strings.Contains(evidence, "decode's MUL_MAT q4_0: 70% of its graphs' time at 50% of its roof (compute-bound)") {
		t.Errorf("steps of 4 that bought little: %s %q", f.Advice, f.Evidence)
	}
	// Steps of 2, a sequence at a time: more slots reach the widths that share.
	p.Phases[0].Widths[1] = summary.Width{Width: "2", Steps: 100, StepMS: summary.Quantiles{P50: 38}, Sequences: 2, Cost: 1.88, Gain: 1.06}
	for _, x := range Findings(p) {
		if x.ID == "batching-little" && (!strings.Contains(x.Advice, "4 or more slots") || strings.Contains(strings.Join(x.Evidence, "; "), "MUL_MAT")) {
			t.Errorf("steps of 2 that bought little: %s %q", x.Advice, x.Evidence)
		}
	}
}
