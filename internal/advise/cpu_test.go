package advise

import (
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

// The contention and quota findings say what was measured: the share, the cost, the
// quota and the -t it supports.
func TestContentionAndQuotaEvidence(t *testing.T) {
	p := clean()
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 40, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU, Contended: 30, ContendedSeconds: 0.8, Cost: 0.5}
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
		t.Errorf("without a baseline: %v", f)
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

// A software device (lavapipe) computes in the process's own threads: the starved
// finding names it as what took the CPUs, with advice that fits, and the barrier finding
// counts it as the other load; where every split ran on the CPU, it is not named.
func TestSoftwareDevice(t *testing.T) {
	p := clean()
	p.Software = "lavapipe"
	p.Backends = []summary.Backend{{Backend: "CPU", Splits: 20, Seconds: 1}, {Backend: "VK", Splits: 20, Seconds: 0.01}}
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 10, ThreadSeconds: 2, OnCPU: 1, Wait: 0.9, Share: 0.5, Judged: true, Starved: true, Lacked: summary.LackedCPU}
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
