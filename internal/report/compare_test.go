package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/compare"
)

func TestCompare(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 2, 0, 0, time.UTC)
	row := func(r compare.Row, a, b, change float64, beyond bool) compare.Row {
		r.A, r.B, r.Change, r.Beyond = a, b, compare.Estimate{Value: change, Low: change - 0.1, High: change + 0.1}, beyond
		return r
	}
	c := &compare.Comparison{
		A:        compare.SideInfo{Name: "A", Selection: compare.Selection{Spec: "q4.jsonl"}, Processes: []string{"llama-bench (pid 1)"}, First: at, Last: at.Add(time.Minute)},
		B:        compare.SideInfo{Name: "B", Selection: compare.Selection{Spec: "f16.jsonl@pid=2"}, Processes: []string{"llama-bench (pid 2)"}, First: at, Last: at.Add(time.Minute)},
		Warnings: []string{"different machines (host a vs b): a change may be the machine's"},
		Setup: []compare.SetupItem{
			{Key: "llama.model.file_type", Label: "weights' type (file)", A: "Q4_0", B: "F16", Differs: true},
			{Key: "llama.build.number", Label: "llama.cpp build", A: "4000", B: "unknown"},
			{Key: "ggml.runtime", Label: "runtime", A: "llama.cpp", B: "llama.cpp"},
			{Key: "cpu_share", Label: "threads on a CPU", A: "decode 93%", B: "decode 95%"},
			{Key: "os.version", Label: "kernel", A: "unknown", B: "unknown"},
		},
		Phases: []compare.PhaseDiff{{
			Phase: "decode", Unit: "token",
			A:      compare.PhaseSide{Steps: 128, Tokens: 128, PerUnitMS: 40, PerSecond: 25, TracedSteps: 128, Blocks: 64},
			B:      compare.PhaseSide{Steps: 128, Tokens: 128, PerUnitMS: 100, PerSecond: 10, TracedSteps: 128, Blocks: 64},
			Change: compare.Estimate{Value: 60, Low: 55, High: 65}, Relative: compare.Estimate{Value: 1.5, Low: 1.4, High: 1.6},
			Floor: 0.15, Beyond: true, Verdict: "slower",
			Rows: []compare.Row{
				row(compare.Row{Kind: "op", Op: "MUL_MAT", BackendA: "CPU", BackendB: "CPU", WeightA: "q4_0", WeightB: "f16", Presence: "both", Share: 0.95}, 30, 87, 57, true),
				row(compare.Row{Kind: "op", Op: "RMS_NORM+MUL", BackendB: "CPU", Presence: "b", Share: 0.02}, 0, 1, 1, false),
				row(compare.Row{Kind: "op", Op: "MUL_MAT", BackendA: "CPU", BackendB: "VK", WeightA: "f32", WeightB: "f32", Presence: "moved"}, 2, 0, -2, false),
				row(compare.Row{Kind: "device", BackendB: "VK", Presence: "b"}, 0, 2, 2, false),
				row(compare.Row{Kind: "outside", Presence: "both", Share: 0.03}, 8, 10, 2, false),
			},
			Moves: []compare.Move{{From: "CPU", To: "VK", Layers: []int{0, 1, 2, 5}, Nodes: 12}},
		}, {Phase: "prefill", Verdict: "only in A", Notes: []string{"B computed no prefill phase"}, A: compare.PhaseSide{Steps: 2}}},
		Method: compare.Method{MinShare: 0.01, FewGraphsShare: 0.05, Confidence: 0.95, Resamples: 2000},
	}
	var out bytes.Buffer
	if err := Compare(&out, c); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"A: q4.jsonl: llama-bench (pid 1)",
		"! different machines",
		"≠ weights' type (file)  Q4_0",
		"? llama.cpp build",
		"≈ threads on a CPU",
		"the same on both: runtime llama.cpp",
		"unknown on both (older recordings lack them): kernel",
		"decode: 40.0 → 100.0 ms a token (+60.0 ms, +150.0%; interval +55.0 … +65.0 ms): slower, beyond noise (noise floor ±15%)",
		"MUL_MAT q4_0 → f16",
		"RMS_NORM+MUL (only in B)",
		"CPU → Vulkan",
		"device work (handing over to done)",
		"outside the graphs",
		"moved from CPU to Vulkan: 12 nodes of layers 0–2, 5",
		"prefill: only in A",
		"note: B computed no prefill phase",
		"a row's beyond it of the row's and 1% of the phase's",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	// Largest first as given, the rest summed, what the ops leave last.
	if i, j := strings.Index(got, "MUL_MAT q4_0"), strings.Index(got, "outside the graphs"); i < 0 || j < i {
		t.Errorf("rows out of order:\n%s", got)
	}
}
