package advise

import (
	"math"
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

// Each threads finding names the threads to run with in the runtime's own words, at the
// CPUs, cores or performance cores it may use.
func TestThreadsOption(t *testing.T) {
	for _, tc := range []struct {
		runtime, exe string
		cpus         summary.CPUs
		severity     summary.Severity
		want         string
	}{
		{"llama.cpp", "llama-server", summary.CPUs{Allowed: 2, Cores: 2, Threads: 8}, "warning", "-t 2 (--threads"},
		{"ollama", "ollama", summary.CPUs{Allowed: 2, Cores: 2, Threads: 8}, "warning", "num_thread 2"},
		{"llama.cpp", "node", summary.CPUs{Allowed: 16, Cores: 8, Threads: 16}, "info", "8 threads (n_threads"},
		{"whisper.cpp", "whisper-cli", summary.CPUs{Allowed: 20, Cores: 14, Performance: 6, Threads: 14}, "info", "-t 6 (n_threads"},
	} {
		p := clean()
		p.Runtime, p.Resource = tc.runtime, []summary.KV{{Key: "process.executable.name", Value: tc.exe}}
		p.CPUs, p.Quota = &tc.cpus, nil
		f, ok := overCPUs(p)
		if !ok || f.Severity != tc.severity || !strings.Contains(f.Advice, tc.want) {
			t.Errorf("%s %s %+v: %v %s %q; want %s naming %q", tc.runtime, tc.exe, tc.cpus, ok, f.Severity, f.Advice, tc.severity, tc.want)
		}
	}
}

// Too few threads: the gain is estimated op by op, each op's time shrinking with the
// threads down to its roof; silent when the threads lacked their CPUs, when the ops are
// at their roofs, or when a quota allows no more.
func TestFewThreads(t *testing.T) {
	p := clean()
	p.CPUs.Threads, p.Quota.Threads = 1, 1
	p.Phases[0].Ops[0].PeakFrac = 0.3 // MUL_MAT: 0.7 of the time, at 30% of its roof
	fs := Findings(p)
	if len(fs) != 1 || fs[0].ID != "threads-few" || fs[0].Gain == nil {
		t.Fatalf("findings %v, want threads-few with a gain", fs)
	}
	// MUL_MAT halves (1 → 2 threads, its roof far); ADD, overhead-bound, keeps its time:
	// (0.35 + 0.02) / 0.72 of 50 ms a token.
	g := fs[0].Gain
	if want := 50 * 0.37 / 0.72; math.Abs(g.To-want) > 1e-9 || g.From != 50 || math.Abs(g.Saved-(50-want)*20/1e3) > 1e-9 {
		t.Errorf("gain %+v, want 50 → %.1f ms a token", g, want)
	}
	if !strings.Contains(fs[0].Evidence[len(fs[0].Evidence)-1], "1.9× the tokens/s") {
		t.Errorf("evidence %q does not say the gain", fs[0].Evidence)
	}
	// An op near its roof gains only up to it.
	p.Phases[0].Ops[0].PeakFrac = 0.45
	if f, _ := fewThreads(p); f.Gain == nil || math.Abs(f.Gain.To-50*(0.7*0.5+0.02)/0.72) > 1e-9 {
		t.Errorf("at 45%% of the roof: %+v", f.Gain)
	}
	for name, build := range map[string]func(p *summary.Process){
		"starved":         func(p *summary.Process) { p.Phases[0].CPU.Starved = true },
		"at the roof":     func(p *summary.Process) { p.Phases[0].Ops[0].PeakFrac = 0.9 },
		"a quota of 1":    func(p *summary.Process) { p.Quota.CPUs = 1 },
		"one graph":       func(p *summary.Process) { p.Phases[0].CPU.Judged = false },
		"no CPUs read":    func(p *summary.Process) { p.CPUs = nil },
		"a core a thread": func(p *summary.Process) { p.CPUs.Threads = 2 },
		// A deep, narrow model: its ops' time is dispatch and barriers, which more
		// threads lengthen (its decode ran 2.0× faster on 1 thread than on 2).
		"overhead-bound ops": func(p *summary.Process) {
			p.Phases[0].Ops[0].Bound, p.Phases[0].Ops[0].PeakFrac = summary.BoundOverhead, 0.03
		},
		// llama-bench -t 1 beside a busy loop on the other core: no core was free.
		"a neighbour on the other core": func(p *summary.Process) { p.CPUs.Idle, p.CPUs.Measured = 0.03, true },
	} {
		q := clean()
		q.CPUs.Threads = 1
		q.Phases[0].Ops[0].PeakFrac = 0.3
		build(q)
		if f, ok := fewThreads(q); ok {
			t.Errorf("%s: %s", name, f.Title)
		}
	}
}

// Findings are ordered: warnings first, the largest estimated gain first among them.
func TestFindingsByGain(t *testing.T) {
	p := clean()
	p.CPUs.Threads, p.Quota.Threads = 1, 1
	p.Phases[0].Ops[0].PeakFrac = 0.3
	p.Phases[0].Ops[1].Share = 0.12 // overhead-bound: a warning without a gain
	fs := Findings(p)
	if len(fs) != 2 || fs[0].ID != "threads-few" || fs[1].ID != "overhead-bound" {
		t.Errorf("order %v, want the finding with a gain first", fs)
	}
}

// Where a neighbour kept some of the cores busy, the advice counts the idle ones: one
// thread on four cores, 1.8 of them idle, is advised three.
func TestFewThreadsBesideNeighbour(t *testing.T) {
	p := clean()
	p.CPUs = &summary.CPUs{Allowed: 4, Cores: 4, Threads: 1, Idle: 1.8, Measured: true}
	p.Quota = nil
	p.Phases[0].Ops[0].PeakFrac = 0.1
	f, ok := fewThreads(p)
	if !ok || !strings.Contains(f.Advice, "-t 3") && !strings.Contains(f.Advice, "3 threads") || !strings.Contains(f.Title, "1.8 of its CPUs sat idle") ||
		!strings.Contains(strings.Join(f.Evidence, "\n"), "1.8 of the 4 CPUs it may run on sat idle") {
		t.Errorf("beside a neighbour of 1.2 CPUs: %v %s %s %q", ok, f.Title, f.Advice, f.Evidence)
	}
	if f.Gain == nil || !strings.Contains(f.Gain.Assumes, "from 1 to 3 threads") {
		t.Errorf("gain %+v, want it estimated at 3 threads", f.Gain)
	}
}
