//go:build e2e

package receiver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/advise"
	"github.com/profinfer/profinfer/internal/simd"
	"github.com/profinfer/profinfer/internal/summary"
	"github.com/profinfer/profinfer/internal/testbench"
)

// The SIMD a process's CPU backend was built for against this machine's CPU, on its
// resource and in the summary: the test bench's llama.cpp, built for the instruction sets
// /proc/cpuinfo lists, reads as the CPU does; Ollama's old engine, which `go build`
// compiles through cgo with no -march, reads as x86-64's baseline, below the CPU.
func TestE2ESIMD(t *testing.T) {
	e := testbench.Require(t)
	host := simd.Host()
	if host == "" {
		t.Fatal("no SIMD read from /proc/cpuinfo")
	}
	check := func(t *testing.T, res map[string]any, p *summary.Process, build string) {
		t.Helper()
		t.Logf("ggml.cpu.simd = %v, host.cpu.simd = %v; summary %+v", res["ggml.cpu.simd"], res["host.cpu.simd"], p.SIMD)
		if res["ggml.cpu.simd"] != build || res["host.cpu.simd"] != host {
			t.Errorf("resource says build %v on host %v, want %s on %s", res["ggml.cpu.simd"], res["host.cpu.simd"], build, host)
		}
		if p.SIMD != (summary.SIMD{Build: build, Host: host}) {
			t.Errorf("summary's SIMD %+v, want %s on %s", p.SIMD, build, host)
		}
	}

	t.Run("llama-bench", func(t *testing.T) {
		bench := e.Bin("llama-bench")
		r := profileRun(t, 3*time.Minute, bench, "", nil, bench, e.BenchArgs("llama-1b-q4_0", 16, 4, 2, 1)...)
		check(t, lastResource(t, r), r.summary, host)
		advise.Annotate(&summary.View{Processes: []*summary.Process{r.summary}})
		if f := finding(r.summary, "simd-narrow"); f != nil {
			t.Errorf("a build for this CPU: %s", f.Title)
		}
	})

	t.Run("ollama-engine", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		// A window every 500 ms: at the default 10 s, the one window of its 2 s could fall
		// on the graph its attach ran beside, and leave no graph judged.
		c, o := ollamaServing(t, ctx, (*testbench.Env).OllamaOldExe, "nodes: {sample_interval: 500ms}", "OLLAMA_NEW_ENGINE=1")
		if _, err := o.Generate(ctx, "llama-1b", "The capital of France is", 2, ""); err != nil {
			t.Fatal(err)
		}
		pid := runner(t, ctx, o)
		if cmd := ollamaChildren(o.PID())[pid]; !strings.Contains(cmd, "--ollama-engine") {
			t.Fatalf("the runner is not Ollama's engine: %s", cmd)
		}
		// Tokens enough for a sampling window's graphs and a judged phase: some 2 s.
		if _, err := o.Generate(ctx, "llama-1b", "The capital of France is", 16, ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		traces, _ := c.stop(t)
		var res map[string]any
		for _, td := range traces {
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				if r := td.ResourceSpans().At(i).Resource().Attributes().AsRaw(); r["process.pid"] == int64(pid) {
					res = r
				}
			}
		}
		if res == nil {
			t.Fatalf("no spans of the runner (pid %d)", pid)
		}
		view := summarize(t, c.out)
		if len(view.Processes) != 1 {
			t.Fatalf("%d processes in the summary, want the runner", len(view.Processes))
		}
		check(t, res, view.Processes[0], "sse2")
		if b, _ := res["ggml.cpu.simd"].(string); !simd.Narrower(b, host) {
			t.Errorf("the baseline build is not narrower than this CPU's %s", host)
		}
		// Its matmuls, far below the roofs this CPU's vectors reach, are judged by the
		// build wherever they are judged (a phase whose one graph ran beside the attach
		// is not), never overhead-bound or unexplained.
		matmuls := 0
		for _, ph := range view.Processes[0].Phases {
			for _, o := range ph.Ops {
				t.Logf("%s: %s %s, %d calls, %.1f µs a call: %q, %s", ph.Name, o.Op, o.Weight, o.Calls, o.MeanUS, o.Bound, o.Why)
				if o.Op == "MUL_MAT" && o.Weight == "q4_0" && (o.Bound != "" || !strings.HasPrefix(o.Why, "not judged")) {
					matmuls++
					if o.Bound != summary.BoundSIMD {
						t.Errorf("%s: MUL_MAT q4_0 judged %q (%s), want simd", ph.Name, o.Bound, o.Why)
					}
				}
			}
		}
		if matmuls == 0 {
			t.Error("no MUL_MAT q4_0 of the runner judged")
		}
		// Its own finding, naming both SIMD levels, and Ollama's runner.
		advise.Annotate(view)
		p := view.Processes[0]
		for _, f := range p.Findings {
			t.Logf("finding %s %s: %s %q", f.Severity, f.ID, f.Title, f.Evidence)
		}
		if f := finding(p, "simd-narrow"); f == nil || !strings.Contains(f.Title, "sse2") || !strings.Contains(f.Title, host) || !strings.Contains(f.Advice, "Ollama") {
			t.Errorf("no finding of the baseline build: %v", p.Findings)
		}
		for _, id := range []string{"threads-blocked", "threads-contended", "threads-queued", "overhead-bound"} {
			if f := finding(p, id); f != nil {
				t.Errorf("another cause's finding: %s", f.Title)
			}
		}
	})
}
