package advise

import (
	"strings"
	"testing"

	"github.com/profinfer/profinfer/internal/summary"
)

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

// Graphs shorter than a scheduler tick leave the threads' CPU share unresolved, not the
// phase's ops and layers, which the probes' clocks time: cpu-fallback still names the
// layers left on the CPU.
func TestFallbackShortGraphs(t *testing.T) {
	p := clean()
	offloaded(p, []int{})
	p.Phases[0].CPU = &summary.ThreadsCPU{Graphs: 400, Wall: 0.7, ThreadSeconds: 1.4, OnCPU: 0.5, Share: 0.36}
	for _, f := range Findings(p) {
		if f.ID == "cpu-fallback" {
			if !strings.Contains(f.Title, "layers 0–2 left on the CPU") {
				t.Errorf("cpu-fallback %q, want the layers left on the CPU", f.Title)
			}
			return
		}
	}
	t.Error("no cpu-fallback")
}
